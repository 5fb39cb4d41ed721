# Non-finite inputs and the scalar ISA under the sanitizers.
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.

# The scalar ISA on the mixed schedule, whose noise request carries NaN inputs, for every bundled
# fixture: cpu/simd.h's scalar layer must model MAXPS / MINPS / CVTPS2DQ as the vector ISAs execute
# them, so a NaN reaching a kernel's clamp or rounding is never undefined behaviour (UBSan: "nan is
# outside the range of representable values of type 'int'") and the verdict matches the other ISAs'.
foreach(family deepseek_v4 deepseek_v32 hy_v4 qwen4_exp)
  sieve_cli_expect(cli.check_scalar_mixed_${family} SANITIZE EXIT 0 OUTPUT "all layers within tolerance"
                   COMMAND check ${fixtures}/${family} --backend cpu:scalar --schedule mixed)
endforeach()

# A DSA checkpoint with one NaN attention weight (nan_weight/<family>, written by the model test
# DsaMlaFixtureCopies.WriteNanWeight): `sieve run` reports the non-finite outputs it counted
# (non_finite_outputs > 0) and ends with an error (exit 2); the sparse attention (ops/sparse_attention.h)
# used to turn the NaN rows into zeros, and the run reported 0.
set(numerics_scratch ${CMAKE_CURRENT_BINARY_DIR}/numerics_scratch)
add_test(NAME cli.numerics_write_nan_weight COMMAND test_dsa_mla --gtest_filter=DsaMlaFixtureCopies.WriteNanWeight)
set_tests_properties(cli.numerics_write_nan_weight PROPERTIES
                     ENVIRONMENT SIEVE_NUMERICS_SCRATCH=${numerics_scratch}
                     FIXTURES_SETUP numerics_nan_weight LABELS sanitize)
foreach(family deepseek_v32 hy_v4)
  sieve_cli_expect(cli.run_nan_weight_${family} SANITIZE EXIT 2
                   OUTPUT "\"non_finite_outputs\": [1-9].*non-finite values in the last layer's outputs"
                   COMMAND run ${numerics_scratch}/nan_weight/${family} --requests 1 --prompt-tokens 16
                           --decode-tokens 2 --json)
  set_tests_properties(cli.run_nan_weight_${family} PROPERTIES FIXTURES_REQUIRED numerics_nan_weight)
endforeach()

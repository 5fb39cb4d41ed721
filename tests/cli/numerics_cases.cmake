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

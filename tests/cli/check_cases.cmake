# `sieve check` verdicts: a dead indexer and hostile references fail, raw references pass
# (golden_format.md). Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
sieve_add_test(test_cli_check SANITIZE SOURCES check_test.cpp LIBS sieve_cli nlohmann_json::nlohmann_json)

# Broken copies of the fixtures, written by the gtest itself (CheckFixtureCopies.Write) before the
# CLI cases that need them: dead_indexer/<family> (one indexer weight all NaN) and
# duplicate_topk/deepseek_v32 (a .topk row that lists an entry twice).
set(check_scratch ${CMAKE_CURRENT_BINARY_DIR}/check_scratch)
add_test(NAME cli.check_write_broken_fixtures COMMAND test_cli_check --gtest_filter=CheckFixtureCopies.Write)
set_tests_properties(cli.check_write_broken_fixtures PROPERTIES
                     ENVIRONMENT SIEVE_CHECK_SCRATCH=${check_scratch}
                     FIXTURES_SETUP check_broken_fixtures LABELS unit)

foreach(family deepseek_v4 deepseek_v32 hy_v4 qwen4_exp)
  # A dead indexer is a failed verdict (exit 1) with its reason, in both profiles, never "all
  # layers within tolerance" on the reference's own selections.
  sieve_cli_expect(cli.check_dead_indexer_${family} EXIT 1
                   OUTPUT "FAIL: [^\n]*tokens? with (constant|non-finite) index scores.*layer check\\(s\\) out of tolerance"
                   REJECT "all layers within tolerance"
                   COMMAND check ${check_scratch}/dead_indexer/${family})
  sieve_cli_expect(cli.check_dead_indexer_${family}_deployed EXIT 1
                   OUTPUT "FAIL: [^\n]*tokens? with (constant|non-finite) index scores"
                   COMMAND check ${check_scratch}/dead_indexer/${family} --profile deployed)
  set_tests_properties(cli.check_dead_indexer_${family} cli.check_dead_indexer_${family}_deployed
                       PROPERTIES FIXTURES_REQUIRED check_broken_fixtures)

  # The reference's raw top-k rows pass: entries past a token's causal range mean "none".
  sieve_cli_expect(cli.check_raw_topk_${family} EXIT 0 OUTPUT "all layers within tolerance" REJECT "FAIL"
                   COMMAND check ${fixtures}/raw_topk/${family})
  sieve_cli_expect(cli.check_raw_topk_${family}_decode EXIT 0 OUTPUT "all layers within tolerance" REJECT "FAIL"
                   COMMAND check ${fixtures}/raw_topk/${family} --schedule decode)
  sieve_cli_expect(cli.check_raw_topk_${family}_deployed EXIT 0 OUTPUT "all layers within tolerance" REJECT "FAIL"
                   COMMAND check ${fixtures}/raw_topk/${family} --profile deployed)
endforeach()

# The report says how many reference entries it read as none (qwen4_exp's reference never lists any).
sieve_cli_expect(cli.check_raw_topk_none_entries EXIT 0
                 OUTPUT "reference top-k: 372 entries past their token's causal range read as none"
                 COMMAND check ${fixtures}/raw_topk/deepseek_v32 --schedule mixed)

# A corrupt reference is an error naming the tensor (exit 2), not a verdict.
sieve_cli_expect(cli.check_duplicate_topk_entry EXIT 2 OUTPUT "sieve: .*req1\\.layer0\\.topk row 16 lists entry [0-9]+ twice"
                 COMMAND check ${check_scratch}/duplicate_topk/deepseek_v32)
set_tests_properties(cli.check_duplicate_topk_entry PROPERTIES FIXTURES_REQUIRED check_broken_fixtures)

# The MTP layers (tests/data/mtp/: each family's fixture with one MTP layer after the main ones, whose
# golden is transformers' attention module of the kind the spec gives the MTP layer) pass like the main
# layers, in both profiles and every schedule; `sieve check` runs the MTP layers the config announces.
foreach(family deepseek_v4 deepseek_v32 hy_v4 qwen4_exp)
  foreach(profile exact deployed)
    foreach(schedule one-shot decode mixed chunk:3)
      string(REPLACE ":" "_" schedule_name ${schedule})
      sieve_cli_expect(cli.check_mtp_${family}_${profile}_${schedule_name} EXIT 0
                       OUTPUT "all layers within tolerance" REJECT "FAIL"
                       COMMAND check ${fixtures}/mtp/${family} --profile ${profile} --schedule ${schedule})
    endforeach()
  endforeach()
endforeach()

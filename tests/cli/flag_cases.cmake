# Numeric flags and hostile values: every one is range-checked with a message naming it (exit 2).
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.
#
# Each bad value must fail while the command line is checked, before a model is built, so that
# these run in a moment under the sanitizers too.

# _sieve_cli_reject(<subcommand> <flag> ARGS <arguments before the flag...> VALUES <values...>)
# One test per value: `sieve <subcommand> <ARGS> <flag> <value>` exits 2 with a message that
# starts with "sieve: " and names the flag and the value.
function(_sieve_cli_reject subcommand flag)
  cmake_parse_arguments(ARG "" "" "ARGS;VALUES" ${ARGN})
  foreach(value IN LISTS ARG_VALUES)
    string(REGEX REPLACE "([][.+*?()^$|\\\\])" "\\\\\\1" pattern "${value}")
    sieve_cli_expect(cli.flag.${subcommand}${flag}=${value} SANITIZE EXIT 2
                     OUTPUT "sieve: (invalid argument: )?${flag} ${pattern}: "
                     COMMAND ${subcommand} ${ARG_ARGS} ${flag} ${value})
  endforeach()
endfunction()

set(int64_max 9223372036854775807)
set(past_int64 99999999999999999999)

# sieve run: each count in its range (run.h), the seed a non-negative int64.
_sieve_cli_reject(run --requests VALUES 0 -1 4097 ${int64_max} ${past_int64} abc 1.5 0x10)
_sieve_cli_reject(run --prompt-tokens VALUES 0 -1 16777217 ${int64_max} ${past_int64} x)
_sieve_cli_reject(run --decode-tokens VALUES -1 16777217 ${int64_max} ${past_int64} x)
_sieve_cli_reject(run --budget VALUES 0 -1 16385 ${int64_max} ${past_int64} x)
_sieve_cli_reject(run --draft-tokens VALUES -1 17 ${int64_max} x)
_sieve_cli_reject(run --accept-rate VALUES -0.1 1.5 nan inf x)
_sieve_cli_reject(run --shared-prefix VALUES -1 16777217 ${int64_max} x)
_sieve_cli_reject(run --prompt-families VALUES 0 -1 65537 ${int64_max} x)
sieve_cli_expect(cli.flag.run_shared_prefix_past_prompt SANITIZE EXIT 2
                 OUTPUT "sieve: invalid argument: --shared-prefix 9: the shared part of a prompt, at most --prompt-tokens 8"
                 COMMAND run ${fixtures}/hy_v4/ckpt --prompt-tokens 8 --shared-prefix 9)
_sieve_cli_reject(run --seed VALUES -1 ${past_int64} 18446744073709551615 x)
# --layers: a number past the model's 43 layers and its MTP layer (43) is an error before a range is
# expanded (these filled memory, or looped forever on a signed overflow).
_sieve_cli_reject(run --layers VALUES 0-99999999999 0-${int64_max} ${past_int64} 44 0-44)
_sieve_cli_reject(run --preset VALUES garbage deepseek-v5)
_sieve_cli_reject(run --backend VALUES garbage cpu:avx9 cpu:scalar:x)
sieve_cli_expect(cli.flag.run--profile=garbage SANITIZE EXIT 2 OUTPUT "sieve: --profile: garbage"
                 COMMAND run --profile garbage)
sieve_cli_expect(cli.flag.run--layers=linear_attention SANITIZE EXIT 2
                 OUTPUT "sieve: .*--layers 0: layer 0 of qwen4_exp is a linear_attention layer"
                 COMMAND run ${fixtures}/qwen4_exp/ckpt --layers 0)

# Workloads against the model and the machine, before weights or caches: a prompt past
# max_position_embeddings (the caches were sized for it first, and it failed as an allocation of
# them), counts whose product passes int64, and caches larger than any machine's memory.
sieve_cli_expect(cli.flag.run_past_max_position SANITIZE EXIT 2
                 OUTPUT "sieve: .*--prompt-tokens 2000000 \\+ --decode-tokens 16 = 2000016 tokens per request, more than max_position_embeddings 1048576 of deepseek_v4"
                 COMMAND run --prompt-tokens 2000000)
sieve_cli_expect(cli.flag.run_past_max_position_by_one SANITIZE EXIT 2
                 OUTPUT "sieve: .*--prompt-tokens 4081 \\+ --decode-tokens 16 = 4097 tokens per request, more than max_position_embeddings 4096 of hy_v4"
                 COMMAND run ${fixtures}/hy_v4/ckpt --prompt-tokens 4081)
sieve_cli_expect(cli.flag.run_tokens_overflow SANITIZE EXIT 2
                 OUTPUT "sieve: .*--prompt-tokens 16777216 \\+ --decode-tokens 16777216 = 33554432 tokens per request"
                 COMMAND run --requests 4096 --prompt-tokens 16777216 --decode-tokens 16777216 --budget 16384)
sieve_cli_expect(cli.flag.run_cache_past_memory SANITIZE EXIT 2
                 OUTPUT "sieve: out of memory: the workload needs at least [0-9.]+ GB of cache \\(4096 request\\(s\\) × 1000016 tokens.*more than this machine's [0-9.]+ GB of memory"
                 COMMAND run --requests 4096 --prompt-tokens 1000000)

# Valid edges, on the small fixture checkpoints: the smallest workload, a request of exactly
# max_position_embeddings tokens, a one-token budget and the largest seed.
# Speculative decoding on a fixture checkpoint: 3 drafts per decode step, every draft accepted or none.
sieve_cli_expect(cli.flag.run_drafts_all_accepted SANITIZE EXIT 0
                 OUTPUT "3 per decode step, accept rate 1.00: 9 drafted, 9 accepted \\(9 decode steps saved\\)"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --accept-rate 1)
# With the MTP layer as the draft model: the prompt's 5 tokens with the target's prefill, then per
# verification draft step 0 over the tokens it has not run (1, then 4, 4) and two steps that reuse step 0's
# top-k.
sieve_cli_expect(cli.flag.run_drafts_mtp_model SANITIZE EXIT 0
                 OUTPUT "draft      MTP layer\\(s\\) 4: 10 steps over 20 tokens, 6 of them reusing draft step 0's top-k"
                 COMMAND run ${fixtures}/mtp/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --accept-rate 1)
sieve_cli_expect(cli.flag.run_drafts_mtp_json SANITIZE EXIT 0
                 OUTPUT "\"draft_layers\": \\[\n *4\n *\\],\n *\"draft_model\": \"mtp\",\n *\"draft_model_tokens\": 20,\n *\"draft_reused_topk_tokens\": 6"
                 COMMAND run ${fixtures}/mtp/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --accept-rate 1 --json)
sieve_cli_expect(cli.flag.run_drafts_no_model SANITIZE EXIT 0
                 OUTPUT "draft      no draft model \\(the config has no MTP layers, or --draft-model none\\)"
                 COMMAND run ${fixtures}/mtp/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --draft-model none)
sieve_cli_expect(cli.flag.run_draft_model_without_mtp_layers SANITIZE EXIT 2
                 OUTPUT "sieve: invalid argument: --draft-model mtp: .*hy_v4/ckpt has no MTP layers"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --draft-model mtp)
sieve_cli_expect(cli.flag.run_draft_model_without_drafts SANITIZE EXIT 2
                 OUTPUT "sieve: invalid argument: --draft-model mtp needs --draft-tokens"
                 COMMAND run ${fixtures}/mtp/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 2 --draft-model mtp)
sieve_cli_expect(cli.flag.run--draft-model=garbage SANITIZE EXIT 2 OUTPUT "sieve: --draft-model: garbage not in \\{auto,mtp,none\\}"
                 COMMAND run --draft-model garbage)
sieve_cli_expect(cli.flag.run_drafts_all_rejected SANITIZE EXIT 0
                 OUTPUT "3 per decode step, accept rate 0.00: 30 drafted, 0 accepted \\(0 decode steps saved\\)"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 1 --prompt-tokens 5 --decode-tokens 12 --draft-tokens 3 --accept-rate 0)
# Prefix caching on a fixture checkpoint (DSA blocks of 64 tokens: chunks of 64): two prompts shared over
# their first 160 tokens by two requests each; with a budget of 64 tokens a step, each prompt's second
# request starts after its first request's two cached chunks.
sieve_cli_expect(cli.flag.run_shared_prefix SANITIZE EXIT 0
                 OUTPUT "256 of 800 prompt tokens from cached prefixes \\(32%, 2 of 4 requests hit, chunks of 64 tokens\\)"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 4 --prompt-tokens 200 --decode-tokens 2 --shared-prefix 160
                         --prompt-families 2 --budget 64)
sieve_cli_expect(cli.flag.run_shared_prefix_json SANITIZE EXIT 0
                 OUTPUT "\"prefix_cache\": {[^}]*\"hit_tokens\": 256,[^}]*\"requests_hit\": 2,"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 4 --prompt-tokens 200 --decode-tokens 2 --shared-prefix 160
                         --prompt-families 2 --budget 64 --json)
sieve_cli_expect(cli.flag.run_smallest_workload SANITIZE EXIT 0
                 OUTPUT "1 request\\(s\\) × \\(1 prompt \\+ 0 decode\\) tokens = 1 tokens"
                 COMMAND run ${fixtures}/hy_v4/ckpt --requests 1 --prompt-tokens 1 --decode-tokens 0)
sieve_cli_expect(cli.flag.run_at_max_position SANITIZE EXIT 0
                 OUTPUT "1 request\\(s\\) × \\(4080 prompt \\+ 16 decode\\) tokens = 4096 tokens"
                 COMMAND run ${fixtures}/hy_v4/ckpt --layers 0 --requests 1 --prompt-tokens 4080 --decode-tokens 16)
sieve_cli_expect(cli.flag.run_one_token_budget SANITIZE EXIT 0
                 OUTPUT "3 request\\(s\\) × \\(8 prompt \\+ 2 decode\\) tokens = 30 tokens, 30 steps, budget 1 tokens/step"
                 COMMAND run ${fixtures}/qwen4_exp/ckpt --layers 1,3 --requests 3 --prompt-tokens 8 --decode-tokens 2
                         --budget 1 --seed ${int64_max})

# sieve check: tolerances finite and in range, the seed a non-negative int64, chunk sizes bounded.
set(check_fixture ${fixtures}/deepseek_v4)
_sieve_cli_reject(check --tolerance ARGS ${check_fixture} VALUES -1 -1e-9 nan inf -inf 1e999 10.5 x)
_sieve_cli_reject(check --min-topk-agreement ARGS ${check_fixture} VALUES -0.1 1.5 nan inf x)
_sieve_cli_reject(check --seed ARGS ${check_fixture} VALUES -1 ${past_int64} x)
_sieve_cli_reject(check --schedule ARGS ${check_fixture}
                  VALUES chunk:0 chunk:-1 chunk:${past_int64} chunk:1048577 chunk:12abc chunk:)
_sieve_cli_reject(check --backend ARGS ${check_fixture} VALUES garbage)
sieve_cli_expect(cli.flag.check--profile=garbage SANITIZE EXIT 2 OUTPUT "sieve: --profile: garbage"
                 COMMAND check ${check_fixture} --profile garbage)
sieve_cli_expect(cli.flag.check_largest_values SANITIZE EXIT 0 OUTPUT "all layers within tolerance"
                 COMMAND check ${check_fixture} --schedule chunk:1048576 --tolerance 10 --min-topk-agreement 0
                         --seed ${int64_max})
sieve_cli_expect(cli.flag.check_one_token_chunks SANITIZE EXIT 0 OUTPUT "schedule chunk:1.*all layers within tolerance"
                 COMMAND check ${check_fixture} --schedule chunk:1)

# sieve bench: fails before it measures the machine.
_sieve_cli_reject(bench --contexts VALUES 0 -1 1048577 ${past_int64} x)
_sieve_cli_reject(bench --batches VALUES 0 -1 257 ${int64_max} x)
_sieve_cli_reject(bench --prefill-chunks VALUES 0 -1 16385 x)
_sieve_cli_reject(bench --prefill-context VALUES 0 -1 1048577 x)
_sieve_cli_reject(bench --dense-max-batch VALUES -1 257 x)
_sieve_cli_reject(bench --compare-context VALUES 0 -1 1048577 x)
_sieve_cli_reject(bench --reps VALUES 0 -1 1001 1.5 99999999999 x)
_sieve_cli_reject(bench --isa VALUES garbage avx1024)
_sieve_cli_reject(bench --compare-isa VALUES garbage)
_sieve_cli_reject(bench --presets VALUES garbage)
sieve_cli_expect(cli.flag.bench_batch_times_context SANITIZE EXIT 2
                 OUTPUT "sieve: .*--batches 256 × --contexts 1048576 \\(\\+ 1 decoded\\) = 268435712 cached tokens"
                 COMMAND bench --batches 256 --contexts 1048576 --presets deepseek-v4-flash)
sieve_cli_expect(cli.flag.bench_context_past_max_position SANITIZE EXIT 2
                 OUTPUT "sieve: .*--contexts 262144 \\(\\+ 1 decoded\\) = 262145 tokens, more than max_position_embeddings 262144 of hy4"
                 COMMAND bench --presets hy4 --contexts 262144)
sieve_cli_expect(cli.flag.bench_prefill_past_max_position SANITIZE EXIT 2
                 OUTPUT "sieve: .*--prefill-context 262144 \\+ --prefill-chunks 512 = 262656 tokens"
                 COMMAND bench --presets qwen3.8-flash-next --prefill-context 262144)
# The largest values each flag takes, measured on the ceilings only.
sieve_cli_expect(cli.flag.bench_largest_values SANITIZE EXIT 0 OUTPUT "\"ceilings\""
                 COMMAND bench --quick --ceilings-only --json --presets deepseek-v4-flash --batches 1 --contexts 1048575
                         --compare-context 1048575 --prefill-context 1032192 --prefill-chunks 16384 --reps 1000
                         --dense-max-batch 256 --isa scalar --compare-isa scalar)

# `sieve bench` as a user meets it: its verdict, noisy points, the --svg path.
# Uses sieve_cli_expect and ${fixtures} from CMakeLists.txt.

# An unwritable --svg path is an error naming it before anything is timed. The sweep asked for
# would take minutes: the timeout fails a command that measures first and checks the path after.
sieve_cli_expect(cli.bench_svg_unwritable EXIT 2 OUTPUT "sieve: .*cannot write the plot to /nonexistent-dir/x\\.svg"
                 COMMAND bench --svg /nonexistent-dir/x.svg --presets qwen3.8-flash-next --no-prefill --reps 1000)
set_tests_properties(cli.bench_svg_unwritable PROPERTIES TIMEOUT 20)
# --ceilings-only runs no sweep: there would be nothing to plot.
sieve_cli_expect(cli.bench_svg_ceilings_only EXIT 2 OUTPUT "sieve: .*--svg.*--ceilings-only"
                 COMMAND bench --ceilings-only --svg ${CMAKE_CURRENT_BINARY_DIR}/bench_ceilings_only.svg)
# --quick (tiny sizes): each point says whether it looks noisy, the targets are shown but not
# evaluated, and the command succeeds; the plot is written.
sieve_cli_expect(cli.bench_quick_not_evaluated EXIT 0
                 OUTPUT "\"noisy\": (true|false).*\"state\": \"not evaluated \\(--quick\\)\".*\"verdict\": \"not evaluated \\(--quick\\)\""
                 COMMAND bench --quick --presets qwen3.8-flash-next --no-prefill --json
                         --svg ${CMAKE_CURRENT_BINARY_DIR}/bench_quick.svg)
# --only chooses the GPU benchmark's kinds of points: an unknown kind is refused, and so is --only
# without a cuda backend (the CPU sweep chooses with --presets).
sieve_cli_expect(cli.bench_only_unknown_kind EXIT 2 OUTPUT "sieve: --only: v5 not in \\{v4,v32,indexer,topk,qsa,step\\}"
                 COMMAND bench --only v5)
sieve_cli_expect(cli.bench_only_needs_cuda EXIT 2 OUTPUT "sieve: invalid argument: sieve bench: --only applies to --backend cuda"
                 COMMAND bench --only v4,topk)

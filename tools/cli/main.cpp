// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "bench.h"
#include "check.h"
#include "inspect.h"
#include "presets.h"
#include "run.h"

namespace {

// Exit codes, the same for every subcommand (README "Exit codes"), so that a script can tell "the
// check ran and found a difference" from "the check could not run": 0 success, 1 the command ran
// and its verdict is a failure (`check`: a layer out of tolerance), 2 an error (bad arguments or
// input, or anything else that stopped the command).
constexpr int exit_verdict_failed = 1;
constexpr int exit_error = 2;

int report(const sieve::Status& status) {
    if (status.is_ok()) return 0;
    std::fflush(stdout);
    fmt::print(stderr, "sieve: {}\n", status.to_string());
    return exit_error;
}

int report(const sieve::Expected<bool>& verdict) {
    if (!verdict.has_value()) return report(verdict.status());
    return verdict.value() ? 0 : exit_verdict_failed;
}

// oneDNN runs its GEMMs on OpenMP threads, between sieve's own threaded ops. OpenMP's default wait
// policy keeps its workers spinning for a while after each GEMM, on the cores the next op needs: a
// decode step of 16 tokens measured up to 1.5x slower (attention 2x). The runtime reads the policy
// only when it loads, so the process sets it and starts itself again, once; a policy already set by
// the user is kept.
void prefer_passive_openmp(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
    execv("/proc/self/exe", argv);  // returns only on failure: then run on with the default policy
}

}  // namespace

int main(int argc, char** argv) {
    prefer_passive_openmp(argv);
    CLI::App app{"sieve: sparse-attention inference engine (DeepSeek-V4, DeepSeek-V3.2, Hy4, Qwen3.8 QSA)"};
    app.require_subcommand(0, 1);

    sieve::cli::InspectOptions inspect;
    CLI::App* inspect_cmd = app.add_subcommand(
        "inspect", "Show a checkpoint's attention layers, their tensors and the caches they need");
    inspect_cmd->add_option("checkpoint", inspect.checkpoint, "checkpoint directory (config.json + *.safetensors)")
        ->required();
    inspect_cmd->add_flag("--json", inspect.json, "write the report as JSON");

    sieve::cli::RunOptions run;
    std::string run_profile = "deployed";
    std::string preset_help = "built-in model with the real shapes and random weights:";
    for (const auto& p : sieve::cli::presets()) preset_help += "\n  " + p.name + ": " + p.description;
    CLI::App* run_cmd = app.add_subcommand(
        "run", "Run a workload of requests through a model's attention stack and report throughput (default job)");
    run_cmd->add_option("checkpoint", run.checkpoint, "checkpoint directory (instead of --preset)");
    run_cmd->add_option("--preset", run.preset, preset_help)->capture_default_str();
    run_cmd->add_option("--layers", run.layers, "layers to run, e.g. 0-3,7 (default: the preset's, or all)");
    run_cmd->add_option("--requests", run.requests, "number of requests")->capture_default_str();
    run_cmd->add_option("--prompt-tokens", run.prompt_tokens, "prompt tokens per request (chunked prefill)")
        ->capture_default_str();
    run_cmd->add_option("--decode-tokens", run.decode_tokens, "tokens decoded one per step after the prompt")
        ->capture_default_str();
    run_cmd->add_option("--budget", run.max_tokens_per_step, "token budget of one step")->capture_default_str();
    run_cmd->add_option("--profile", run_profile, "exact | deployed")
        ->check(CLI::IsMember({"exact", "deployed"}))
        ->capture_default_str();
    run_cmd->add_option("--backend", run.backend, "ref | cpu | cpu:<isa>")->capture_default_str();
    run_cmd->add_option("--seed", run.seed, "seed of the random weights and inputs")->capture_default_str();
    run_cmd->add_flag("--json", run.json, "write the summary as JSON");

    sieve::cli::CheckCommandOptions check;
    std::string profile = "exact";
    CLI::App* check_cmd = app.add_subcommand(
        "check", "Run a golden fixture through the runtime and compare every layer with the reference");
    check_cmd->add_option("fixture", check.fixture, "fixture directory (ckpt/ + golden.safetensors)")->required();
    check_cmd->add_option("--schedule", check.check.schedule, "one-shot | chunk:N | decode | mixed")
        ->capture_default_str();
    check_cmd->add_option("--profile", profile, "exact | deployed")
        ->check(CLI::IsMember({"exact", "deployed"}))
        ->capture_default_str();
    check_cmd->add_option("--backend", check.check.backend, "ref | cpu | cpu:<isa>")->capture_default_str();
    CLI::Option* tolerance_opt = check_cmd->add_option(
        "--tolerance", check.check.rel_tolerance,
        "largest relative error per layer (default: 1e-4 exact; deployed: 0.12 deepseek_v4, 0.35 deepseek_v32/hy_v4, "
        "0.15 qwen4_exp)");
    CLI::Option* agreement_opt = check_cmd->add_option(
        "--min-topk-agreement", check.check.min_topk_agreement,
        "smallest fraction of tokens whose top-k set equals the reference's (default: 1 exact; deployed: 0.85 "
        "deepseek_v4, 0 deepseek_v32/hy_v4, 0.97 qwen4_exp)");
    check_cmd->add_option("--seed", check.check.seed, "seed of the mixed schedule")->capture_default_str();
    check_cmd->add_flag("--json", check.json, "write the report as JSON");

    sieve::cli::BenchOptions bench;
    CLI::App* bench_cmd = app.add_subcommand(
        "bench",
        "Measure this machine's ceilings, then time every stage of each family's layers at the real shapes against "
        "their rooflines (decode batch x context, prefill chunks, threads, ISAs, sparse vs dense)");
    bench_cmd->add_flag("--quick", bench.quick, "small arrays, one repetition, one short context (a smoke test)");
    bench_cmd->add_flag("--ceilings-only", bench.ceilings_only, "measure the machine ceilings only");
    bench_cmd->add_flag("--json", bench.json, "write the results as JSON");
    bench_cmd->add_option("--svg", bench.svg, "write a plot of decode step time vs context (sparse vs dense) here");
    bench_cmd->add_option("--presets", bench.layers.presets, "models to sweep (comma-separated)")
        ->delimiter(',')
        ->capture_default_str();
    bench_cmd->add_option("--contexts", bench.layers.contexts, "decode contexts in tokens")
        ->delimiter(',')
        ->capture_default_str();
    bench_cmd->add_option("--batches", bench.layers.batches, "decode batch sizes (requests per step)")
        ->delimiter(',')
        ->capture_default_str();
    bench_cmd->add_option("--prefill-chunks", bench.layers.prefill_chunks, "prefill chunk sizes in tokens")
        ->delimiter(',')
        ->capture_default_str();
    bool no_prefill = false;
    bench_cmd->add_flag("--no-prefill", no_prefill, "time decode steps only (no prefill chunks)")
        ->excludes(bench_cmd->get_option("--prefill-chunks"));
    bench_cmd->add_option("--prefill-context", bench.layers.prefill_context, "tokens cached before a prefill chunk")
        ->capture_default_str();
    bench_cmd->add_option("--dense-max-batch", bench.layers.dense_max_batch,
                          "run the dense variant at batch sizes up to this")
        ->capture_default_str();
    bench_cmd->add_option("--compare-context", bench.layers.compare_context,
                          "context of the thread and ISA comparisons (batch 1)")
        ->capture_default_str();
    bench_cmd->add_option("--isa", bench.layers.isa, "ISA of the main runs (default: the best this machine has)");
    bench_cmd->add_option("--compare-isa", bench.layers.compare_isa, "ISA compared with the main runs ('' for none)")
        ->capture_default_str();
    bench_cmd->add_option("--reps", bench.layers.reps, "timed repetitions per point (the median is reported)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help prints and exits 0; every parse error is a bad argument.
        return app.exit(e) == 0 ? 0 : exit_error;
    }

    if (bench_cmd->parsed()) {
        if (no_prefill) bench.layers.prefill_chunks.clear();
        return report(sieve::cli::run_bench(bench, std::cout));
    }

    if (run_cmd->parsed() || app.get_subcommands().empty()) {
        run.profile = run_profile == "exact" ? sieve::NumericsProfile::exact : sieve::NumericsProfile::deployed;
        return report(sieve::cli::run_workload(run, std::cout));
    }
    if (check_cmd->parsed()) {
        check.check.profile = profile == "deployed" ? sieve::NumericsProfile::deployed : sieve::NumericsProfile::exact;
        check.tolerance_given = tolerance_opt->count() > 0;
        check.agreement_given = agreement_opt->count() > 0;
        return report(sieve::cli::run_check(check, std::cout));
    }

    if (inspect_cmd->parsed()) return report(sieve::cli::run_inspect(inspect, std::cout));
    return 0;
}

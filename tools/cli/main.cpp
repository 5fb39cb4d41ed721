// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "bench.h"
#include "check.h"
#include "inspect.h"
#include "presets.h"
#include "run.h"

namespace {

int report(const sieve::Status& status) {
    if (status.is_ok()) return 0;
    std::fflush(stdout);
    fmt::print(stderr, "sieve: {}\n", status.to_string());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
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
    check_cmd->add_option("--tolerance", check.check.rel_tolerance, "largest relative error per layer")
        ->capture_default_str();
    check_cmd->add_option("--min-topk-agreement", check.check.min_topk_agreement,
                          "smallest fraction of tokens whose top-k set equals the reference's")
        ->capture_default_str();
    check_cmd->add_option("--seed", check.check.seed, "seed of the mixed schedule")->capture_default_str();
    check_cmd->add_flag("--json", check.json, "write the report as JSON");

    sieve::cli::BenchOptions bench;
    CLI::App* bench_cmd = app.add_subcommand("bench", "Measure this machine's ceilings (bandwidth, FMA and bf16 peaks)");
    bench_cmd->add_flag("--quick", bench.quick, "smaller arrays and fewer repetitions");
    bench_cmd->add_flag("--json", bench.json, "write the results as JSON");

    CLI11_PARSE(app, argc, argv);

    if (bench_cmd->parsed()) return report(sieve::cli::run_bench(bench, std::cout));

    if (run_cmd->parsed() || app.get_subcommands().empty()) {
        run.profile = run_profile == "exact" ? sieve::NumericsProfile::exact : sieve::NumericsProfile::deployed;
        return report(sieve::cli::run_workload(run, std::cout));
    }
    if (check_cmd->parsed()) {
        check.check.profile = profile == "deployed" ? sieve::NumericsProfile::deployed : sieve::NumericsProfile::exact;
        return report(sieve::cli::run_check(check, std::cout));
    }

    if (inspect_cmd->parsed()) return report(sieve::cli::run_inspect(inspect, std::cout));
    return 0;
}

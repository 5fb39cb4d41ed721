// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "check.h"
#include "inspect.h"

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
    app.require_subcommand(1);

    sieve::cli::InspectOptions inspect;
    CLI::App* inspect_cmd = app.add_subcommand(
        "inspect", "Show a checkpoint's attention layers, their tensors and the caches they need");
    inspect_cmd->add_option("checkpoint", inspect.checkpoint, "checkpoint directory (config.json + *.safetensors)")
        ->required();
    inspect_cmd->add_flag("--json", inspect.json, "write the report as JSON");

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

    CLI11_PARSE(app, argc, argv);

    if (check_cmd->parsed()) {
        check.check.profile = profile == "deployed" ? sieve::NumericsProfile::deployed : sieve::NumericsProfile::exact;
        return report(sieve::cli::run_check(check, std::cout));
    }

    if (inspect_cmd->parsed()) return report(sieve::cli::run_inspect(inspect, std::cout));
    return 0;
}

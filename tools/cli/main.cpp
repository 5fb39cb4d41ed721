// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

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

    CLI11_PARSE(app, argc, argv);

    if (inspect_cmd->parsed()) return report(sieve::cli::run_inspect(inspect, std::cout));
    return 0;
}

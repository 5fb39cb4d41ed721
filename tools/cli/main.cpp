// The sieve command line: one subcommand per job.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <new>
#include <stdexcept>

#include "sieve/backends/backend.h"
#include "bench.h"
#include "bench_gpu.h"
#include "check.h"
#include "core/assert.h"
#include "flag_checks.h"
#include "inspect.h"
#include "sieve/models/registry.h"
#include "presets.h"
#include "run.h"

namespace {

using sieve::cli::IntRange;
using sieve::cli::RealRange;

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

// Numeric flags, and names with a fixed set of values, are taken as text and checked by sieve
// (flag_checks.h) rather than converted by CLI11, which clamps "99999999999999999999" and wraps
// "-1" for an unsigned value: every bad value gets one message naming the flag, the value and the
// allowed range, and ends parsing as CLI11's own errors do (exit 2).
template <typename T>
T checked(sieve::Expected<T> value) {
    if (!value.has_value()) throw CLI::ValidationError(value.status().message());
    return *std::move(value);
}

void checked(const sieve::Status& status) {
    if (!status.is_ok()) throw CLI::ValidationError(status.message());
}

template <typename T>
CLI::Option* add_int_flag(CLI::App* cmd, const std::string& flag, T& target, IntRange range, const std::string& help) {
    SIEVE_ASSERT(range.lo >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                     static_cast<uint64_t>(range.hi) <= static_cast<uint64_t>(std::numeric_limits<T>::max()),
                 "a flag's range must fit its type");
    return cmd
        ->add_option_function<std::string>(
            flag,
            [&target, flag, range](const std::string& text) {
                target = static_cast<T>(checked(sieve::cli::parse_int_flag(flag, text, range)));
            },
            fmt::format("{} [{}, {}]", help, range.lo, range.hi))
        ->type_name("INT")
        ->default_str(std::to_string(target));
}

CLI::Option* add_int_list_flag(CLI::App* cmd, const std::string& flag, std::vector<int64_t>& target, IntRange range,
                               const std::string& help) {
    return cmd
        ->add_option_function<std::vector<std::string>>(
            flag,
            [&target, flag, range](const std::vector<std::string>& texts) {
                target.clear();
                for (const std::string& text : texts)
                    target.push_back(checked(sieve::cli::parse_int_flag(flag, text, range)));
            },
            fmt::format("{}, each in [{}, {}]", help, range.lo, range.hi))
        ->type_name("INT")
        ->delimiter(',')
        ->default_str(fmt::format("{}", fmt::join(target, ",")));
}

CLI::Option* add_real_flag(CLI::App* cmd, const std::string& flag, double& target, RealRange range,
                           const std::string& help) {
    return cmd
        ->add_option_function<std::string>(
            flag,
            [&target, flag, range](const std::string& text) {
                target = checked(sieve::cli::parse_real_flag(flag, text, range));
            },
            fmt::format("{} [{}, {}]", help, range.lo, range.hi))
        ->type_name("NUMBER");
}

using TextCheck = std::function<sieve::Status(std::string_view flag, std::string_view value)>;

CLI::Option* add_text_flag(CLI::App* cmd, const std::string& flag, std::string& target, TextCheck check,
                           const std::string& help) {
    return cmd
        ->add_option_function<std::string>(
            flag,
            [&target, flag, check](const std::string& text) {
                checked(check(flag, text));
                target = text;
            },
            help)
        ->default_str(target);
}

CLI::Option* add_text_list_flag(CLI::App* cmd, const std::string& flag, std::vector<std::string>& target,
                                TextCheck check, const std::string& help) {
    return cmd
        ->add_option_function<std::vector<std::string>>(
            flag,
            [&target, flag, check](const std::vector<std::string>& texts) {
                for (const std::string& text : texts) checked(check(flag, text));
                target = texts;
            },
            help)
        ->delimiter(',')
        ->default_str(fmt::format("{}", fmt::join(target, ",")));
}

sieve::Status check_isa_or_default(std::string_view flag, std::string_view name) {
    return sieve::cli::check_isa_flag(flag, name, /*allow_none=*/true);
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
    add_text_flag(run_cmd, "--preset", run.preset, sieve::cli::check_preset_flag, preset_help);
    run_cmd->add_option("--layers", run.layers,
                        "layers to run, e.g. 0-3,7, each a layer of the model (default: the preset's, or all)");
    add_int_flag(run_cmd, "--requests", run.requests, sieve::cli::kRunRequests, "number of requests");
    add_int_flag(run_cmd, "--prompt-tokens", run.prompt_tokens, sieve::cli::kRunPromptTokens,
                 "prompt tokens per request (chunked prefill); prompt + decode at most the model's "
                 "max_position_embeddings");
    add_int_flag(run_cmd, "--decode-tokens", run.decode_tokens, sieve::cli::kRunDecodeTokens,
                 "tokens decoded one per step after the prompt");
    add_int_flag(run_cmd, "--budget", run.max_tokens_per_step, sieve::cli::kRunBudget, "token budget of one step");
    add_int_flag(run_cmd, "--draft-tokens", run.draft_tokens, sieve::cli::kRunDraftTokens,
                 "speculative decoding: draft tokens each decode step verifies (0: plain decode)");
    add_real_flag(run_cmd, "--accept-rate", run.accept_rate, sieve::cli::kRunAcceptRate,
                  "speculative decoding: the chance that a draft is accepted once the drafts before it were");
    run_cmd->add_option("--draft-model", run.draft_model,
                        "speculative decoding: where the drafts come from: mtp (the checkpoint's MTP layers run as the "
                        "draft model, reusing draft step 0's top-k), none (only the verification runs), or auto (mtp "
                        "when the config has MTP layers)")
        ->check(CLI::IsMember({"auto", "mtp", "none"}))
        ->capture_default_str();
    add_int_flag(run_cmd, "--shared-prefix", run.shared_prefix, sieve::cli::kRunSharedPrefix,
                 "prefix caching: the first N prompt tokens of every request are its prompt family's, and cached "
                 "prefixes are reused (0: no prefix caching)");
    add_int_flag(run_cmd, "--prompt-families", run.prompt_families, sieve::cli::kRunPromptFamilies,
                 "prefix caching: distinct shared prefixes, taken by the requests in turn");
    run_cmd->add_option("--profile", run_profile, "exact | deployed")
        ->check(CLI::IsMember({"exact", "deployed"}))
        ->capture_default_str();
    add_text_flag(run_cmd, "--backend", run.backend, sieve::cli::check_backend_flag, sieve::backend_specs_help());
    add_int_flag(run_cmd, "--seed", run.seed, sieve::cli::kSeedRange, "seed of the random weights and inputs");
    run_cmd->add_flag("--json", run.json, "write the summary as JSON");

    sieve::cli::CheckCommandOptions check;
    std::string profile = "exact";
    CLI::App* check_cmd = app.add_subcommand(
        "check", "Run a golden fixture through the runtime and compare every layer with the reference");
    check_cmd->add_option("fixture", check.fixture, "fixture directory (ckpt/ + golden.safetensors)")->required();
    add_text_flag(check_cmd, "--schedule", check.check.schedule, sieve::cli::check_schedule_flag,
                  fmt::format("one-shot | chunk:N | decode | mixed, N in [{}, {}]", sieve::cli::kScheduleChunkRange.lo,
                              sieve::cli::kScheduleChunkRange.hi));
    check_cmd->add_option("--profile", profile, "exact | deployed")
        ->check(CLI::IsMember({"exact", "deployed"}))
        ->capture_default_str();
    add_text_flag(check_cmd, "--backend", check.check.backend, sieve::cli::check_backend_flag, sieve::backend_specs_help());
    // A relative error of 1 is already an output unrelated to the reference; 10 leaves room for
    // looking at broken layers without letting NaN or a negative tolerance through.
    // The deployed defaults of every registered family (models/family.h), e.g. "0.12 deepseek_v4, ...".
    auto deployed_defaults = [](double sieve::DeployedCheckDefaults::*field) {
        std::string out;
        for (const sieve::ModelFamily* f : sieve::model_families())
            out += fmt::format("{}{:g} {}", out.empty() ? "" : ", ", f->deployed_check.*field,
                               fmt::join(f->model_types, "/"));
        return out;
    };
    CLI::Option* tolerance_opt = add_real_flag(
        check_cmd, "--tolerance", check.check.rel_tolerance, RealRange{0, 10},
        fmt::format("largest relative error per layer (default: 1e-4 exact; deployed: {})",
                    deployed_defaults(&sieve::DeployedCheckDefaults::max_relative_error)));
    CLI::Option* agreement_opt = add_real_flag(
        check_cmd, "--min-topk-agreement", check.check.min_topk_agreement, RealRange{0, 1},
        fmt::format("smallest fraction of tokens whose top-k set equals the reference's (default: 1 exact; "
                    "deployed: {})",
                    deployed_defaults(&sieve::DeployedCheckDefaults::min_topk_agreement)));
    add_int_flag(check_cmd, "--seed", check.check.seed, sieve::cli::kSeedRange, "seed of the mixed schedule");
    check_cmd->add_flag("--json", check.json, "write the report as JSON");

    sieve::cli::BenchOptions bench;
    CLI::App* bench_cmd = app.add_subcommand(
        "bench",
        "Measure this machine's ceilings, then time every stage of each family's layers at the real shapes against "
        "their rooflines (decode batch x context, prefill chunks, threads, ISAs, sparse vs dense); with --backend cuda, "
        "the GPU's ceilings and kernels against the GPU targets and peers");
    bench_cmd->add_flag("--quick", bench.quick, "small arrays, one repetition, one short context (a smoke test: targets not evaluated, exit 0)");
    bench_cmd->add_flag("--ceilings-only", bench.ceilings_only, "measure the machine ceilings only");
    bench_cmd->add_flag("--json", bench.json, "write the results as JSON");
    bench_cmd->add_option("--svg", bench.svg, "write a plot of decode step time vs context (sparse vs dense), a panel per preset and batch size swept; the path is checked before anything is timed");
    // Contexts up to the longest of a released model (1M); batches up to the scheduler's requests
    // per step (runtime/scheduler.h); prefill chunks up to `run`'s largest budget. Across flags,
    // check_bench_flags bounds batch × context and each context by the presets' positions.
    constexpr IntRange contexts{1, 1 << 20}, batches{1, 256}, prefill_chunks{1, 16384}, reps{1, 1000};
    add_text_list_flag(bench_cmd, "--presets", bench.layers.presets, sieve::cli::check_preset_flag,
                       "models to sweep (comma-separated)");
    add_int_list_flag(bench_cmd, "--contexts", bench.layers.contexts, contexts, "decode contexts in tokens");
    add_int_list_flag(bench_cmd, "--batches", bench.layers.batches, batches, "decode batch sizes (requests per step)");
    add_int_list_flag(bench_cmd, "--prefill-chunks", bench.layers.prefill_chunks, prefill_chunks,
                      "prefill chunk sizes in tokens");
    bool no_prefill = false;
    bench_cmd->add_flag("--no-prefill", no_prefill, "time decode steps only (no prefill chunks)")
        ->excludes(bench_cmd->get_option("--prefill-chunks"));
    add_int_flag(bench_cmd, "--prefill-context", bench.layers.prefill_context, contexts,
                 "tokens cached before a prefill chunk");
    add_int_flag(bench_cmd, "--dense-max-batch", bench.layers.dense_max_batch, IntRange{0, batches.hi},
                 "run the dense variant at batch sizes up to this (0: never)");
    add_int_flag(bench_cmd, "--compare-context", bench.layers.compare_context, contexts,
                 "context of the thread and ISA comparisons (batch 1)");
    add_text_flag(bench_cmd, "--isa", bench.layers.isa, check_isa_or_default,
                  "ISA of the main runs: scalar | avx2 | avx512 | avx512_bf16 | amx_bf16, at most this machine's (default: the "
                  "best this machine has)");
    add_text_flag(bench_cmd, "--compare-isa", bench.layers.compare_isa, check_isa_or_default,
                  "ISA compared with the main runs ('' for none)");
    add_int_flag(bench_cmd, "--reps", bench.layers.reps, reps, "timed repetitions per point (the median is reported)");
    std::vector<std::string> bench_only;
    bench_cmd->add_option("--only", bench_only, "--backend cuda: time only these kinds of points (v4, v32, indexer, topk, qsa, step: whole decode layer steps; comma-separated)")
        ->delimiter(',')
        ->check(CLI::IsMember(std::vector<std::string>(std::begin(sieve::cli::kGpuBenchKinds), std::end(sieve::cli::kGpuBenchKinds))));
    std::string bench_backend = "cpu";
    add_text_flag(bench_cmd, "--backend", bench_backend, sieve::cli::check_backend_flag,
                  "cpu (the layer sweep above), or cuda | cuda:<N>: the GPU's ceilings, its sparse-attention, "
                  "indexer, top-k and QSA kernels at the CUDA targets' shapes against the peers, and whole decode layer "
                  "steps at 128K tokens, batch 64, against their rooflines (--quick, --json, --reps apply, and --batches "
                  "to the attention points; the other layer-sweep flags do not)");

    // Errors of the command line read as sieve's other errors do.
    app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
        return "sieve: " + CLI::FailureMessage::simple(failed, e);
    });
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help prints and exits 0; every parse error is a bad argument.
        return app.exit(e) == 0 ? 0 : exit_error;
    }

    // The commands return errors as Status; an exception that still escapes one (an allocation the
    // sizing checks did not foresee, a library's own throw) is an error too, never a crash.
    try {
        if (bench_cmd->parsed() && bench_backend.rfind("cuda", 0) == 0) {
            for (const char* flag : {"--ceilings-only", "--svg", "--presets", "--contexts", "--prefill-chunks",
                                     "--no-prefill", "--prefill-context", "--dense-max-batch", "--compare-context", "--isa",
                                     "--compare-isa"})
                if (bench_cmd->count(flag) > 0)
                    return report(sieve::invalid_argument_error("sieve bench: {} applies to the CPU layer sweep, not to --backend {}",
                                                                 flag, bench_backend));
            sieve::cli::GpuBenchOptions gpu;
            gpu.backend = bench_backend;
            gpu.quick = bench.quick;
            gpu.json = bench.json;
            if (bench_cmd->count("--reps") > 0) gpu.reps = bench.layers.reps;
            gpu.only = bench_only;
            if (bench_cmd->count("--batches") > 0) gpu.batches = bench.layers.batches;
            return report(sieve::cli::run_gpu_bench(gpu, std::cout));
        }
        if (bench_cmd->parsed()) {
            if (!bench_only.empty())
                return report(sieve::invalid_argument_error("sieve bench: --only applies to --backend cuda"));
            if (bench_backend != "cpu")
                return report(sieve::invalid_argument_error("sieve bench --backend {}: the layer sweep runs on cpu (choose its ISA with --isa) or a cuda backend", bench_backend));
            if (no_prefill) bench.layers.prefill_chunks.clear();
            if (sieve::Status s = sieve::cli::check_bench_flags(bench.layers); !s.is_ok()) return report(s);
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
    } catch (const std::bad_alloc&) {
        return report(sieve::out_of_memory_error("an allocation failed (the machine ran out of memory)"));
    } catch (const std::exception& e) {
        return report(sieve::internal_error("unexpected exception: {}", e.what()));
    }
    return 0;
}

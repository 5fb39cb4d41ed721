#include "run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <malloc.h>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <set>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "models/attention_layout.h"
#include "models/model_factory.h"
#include "presets.h"
#include "runtime/engine.h"

namespace sieve::cli {

namespace {

// Synthetic attention inputs (unit-variance noise per token); layers are chained, so only the first
// layer's input is asked. Keeps a checksum of the last layer's outputs to show they are finite.
class SyntheticIo final : public RequestIo {
public:
    SyntheticIo(int64_t hidden, int64_t last_layer, uint64_t seed) : hidden_(hidden), last_(last_layer), seed_(seed) {}
    void input(int64_t, int64_t position, float* row) override {
        std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(position));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int64_t i = 0; i < hidden_; ++i) row[i] = normal(rng);
    }
    void output(int64_t layer_pos, int64_t, const float* row) override {
        if (layer_pos != last_) return;
        for (int64_t i = 0; i < hidden_; ++i) {
            if (!std::isfinite(row[i])) ++non_finite;
            checksum += static_cast<double>(row[i]);
        }
    }
    double checksum = 0;
    int64_t non_finite = 0;

private:
    int64_t hidden_, last_;
    uint64_t seed_;
};

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), or 0 where the system has none.
int64_t proc_status_bytes(const std::string& key) {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key + ":", 0) == 0) return 1024 * std::atoll(line.c_str() + key.size() + 1);
    return 0;
}

// Starts a new peak-RSS (VmHWM) measurement from the current RSS (Linux ≥ 4.0; otherwise the peak
// stays the process's whole-life peak and says so by being at least the load's).
void reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

Expected<std::vector<int64_t>> parse_layer_list(const std::string& text) {
    std::set<int64_t> layers;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t comma = text.find(',', start);
        const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t dash = part.find('-');
        try {
            size_t used = 0;
            if (dash == std::string::npos) {
                const int64_t v = std::stoll(part, &used);
                if (used != part.size() || v < 0) throw std::invalid_argument(part);
                layers.insert(v);
            } else {
                const int64_t a = std::stoll(part.substr(0, dash), &used);
                if (used != dash) throw std::invalid_argument(part);
                const int64_t b = std::stoll(part.substr(dash + 1), &used);
                if (used != part.size() - dash - 1 || a < 0 || b < a) throw std::invalid_argument(part);
                for (int64_t v = a; v <= b; ++v) layers.insert(v);
            }
        } catch (const std::exception&) {
            return invalid_argument_error("--layers {}: expected a list like 0-3,7 (non-negative, ascending ranges)",
                                          text);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return std::vector<int64_t>(layers.begin(), layers.end());
}

Status run_workload(const RunOptions& o, std::ostream& out) {
    if (o.requests < 1 || o.prompt_tokens < 1 || o.decode_tokens < 0)
        return invalid_argument_error("--requests {} / --prompt-tokens {} / --decode-tokens {}: need ≥ 1, ≥ 1, ≥ 0",
                                      o.requests, o.prompt_tokens, o.decode_tokens);
    const auto load_start = std::chrono::steady_clock::now();
    ModelConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    std::vector<int64_t> layers;
    std::string source;
    if (!o.layers.empty()) {
        SIEVE_ASSIGN_OR_RETURN(layers, parse_layer_list(o.layers));
    }
    if (!o.checkpoint.empty()) {
        SIEVE_ASSIGN_OR_RETURN(config, load_model_config(o.checkpoint));
        SIEVE_ASSIGN_OR_RETURN(checkpoint, Checkpoint::open(o.checkpoint));
        source = o.checkpoint.string();
    } else {
        SIEVE_ASSIGN_OR_RETURN(config, preset_config(o.preset));
        if (layers.empty())
            for (const Preset& p : presets())
                if (p.name == o.preset) layers = p.default_layers;
        if (o.progress && isatty(STDERR_FILENO))
            fmt::print(stderr, "generating random weights for preset {} (layers {})...\n", o.preset,
                       fmt::join(layers, ","));
        SIEVE_ASSIGN_OR_RETURN(checkpoint, preset_checkpoint(o.preset, config, layers, o.seed));
        source = "preset " + o.preset;
    }
    SIEVE_ASSIGN_OR_RETURN(auto backend, make_backend(o.backend));
    ModelOptions model_options;
    model_options.profile = o.profile;
    model_options.backend = backend.get();
    model_options.layers = layers;
    SIEVE_ASSIGN_OR_RETURN(auto model, load_attention_model(config, *checkpoint, model_options));
    // The model holds its own packed copies of every weight: the checkpoint (mapped files, or a
    // preset's bytes) is not needed past loading.
    int64_t checkpoint_bytes = 0;
    for (std::string_view name : checkpoint->tensor_names())
        if (auto t = checkpoint->find(name)) checkpoint_bytes += static_cast<int64_t>(t->bytes.size());
    checkpoint.reset();
#if defined(__GLIBC__)
    // Hand the heap that loading freed (the checkpoint's in-memory bytes, the conversion buffers of the
    // weight packing) back to the OS: glibc keeps it mapped otherwise, about 170 MiB of the default
    // workload's resident set.
    malloc_trim(0);
#endif
    const int64_t load_peak_rss = proc_status_bytes("VmHWM");
    reset_peak_rss();
    const double load_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const std::vector<int64_t> run_layers = model->layers();

    EngineOptions engine_options;
    engine_options.chain_layers = true;
    engine_options.scheduler.max_tokens_per_step = o.max_tokens_per_step;
    engine_options.cache_budget_tokens = o.requests * (o.prompt_tokens + o.decode_tokens) + o.max_tokens_per_step;
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(*model, engine_options));
    std::vector<std::unique_ptr<SyntheticIo>> ios;
    for (int64_t r = 0; r < o.requests; ++r) {
        ios.push_back(std::make_unique<SyntheticIo>(model->hidden_size(), static_cast<int64_t>(run_layers.size()) - 1,
                                                    o.seed + static_cast<uint64_t>(r)));
        SIEVE_RETURN_IF_ERROR(engine->add_request(r, o.prompt_tokens + o.decode_tokens, o.prompt_tokens, ios.back().get()));
    }
    const bool live = o.progress && isatty(STDERR_FILENO);
    const int64_t total_tokens = o.requests * (o.prompt_tokens + o.decode_tokens);
    const auto run_start = std::chrono::steady_clock::now();
    SIEVE_RETURN_IF_ERROR(engine->run([&](const Engine& e) {
        if (!live) return;
        const EngineStats& s = e.stats();
        fmt::print(stderr, "\r  step {:>5}  prefill {:>7}/{} tokens  decode {:>5}/{} tokens   ", s.steps,
                   s.prefill_tokens, o.requests * o.prompt_tokens, s.decode_tokens, o.requests * o.decode_tokens);
        std::fflush(stderr);
    }));
    if (live) fmt::print(stderr, "\n");
    const double run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    for (int64_t r = 0; r < o.requests; ++r)
        if (engine->status(r) != RequestStatus::finished) return engine->error(r).with_context(fmt::format("request {}", r));
    int64_t non_finite = 0;
    for (const auto& io : ios) non_finite += io->non_finite;

    // Cache bytes per token of the layers that ran, next to dense attention over the same layers.
    SIEVE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(config, o.profile));
    const std::set<int64_t> ran(run_layers.begin(), run_layers.end());
    double sparse_bytes = 0;
    int64_t ran_layout_layers = 0;
    for (const AttentionLayerLayout& l : layout.layers) {
        if (!ran.count(l.layer)) continue;
        ++ran_layout_layers;
        for (const CacheSpec& c : l.caches) sparse_bytes += cache_bytes_per_token(c);
    }
    int64_t all_attention_layers = 0;
    for (const AttentionLayerLayout& l : layout.layers) all_attention_layers += l.sieve_runs;
    const double dense_bytes = all_attention_layers
                                   ? layout.dense_cache_bytes_per_token * static_cast<double>(ran_layout_layers) /
                                         static_cast<double>(all_attention_layers)
                                   : 0.0;
    const EngineStats& s = engine->stats();
    const int64_t run_peak_rss = proc_status_bytes("VmHWM");
    const int64_t weight_bytes = static_cast<int64_t>(backend->prepared_weight_bytes());
    const int64_t workspace_bytes = model->workspace_bytes();
    int64_t cache_bytes = 0;
    for (const auto& g : engine->cache_groups()) cache_bytes += g->storage_bytes();
    const int64_t stated_bytes = weight_bytes + cache_bytes + workspace_bytes;
    const double prefill_tps = s.prefill_seconds > 0 ? static_cast<double>(s.prefill_tokens) / s.prefill_seconds : 0;
    const double decode_tps = s.decode_seconds > 0 ? static_cast<double>(s.decode_tokens) / s.decode_seconds : 0;

    if (o.json) {
        nlohmann::json j{{"source", source},
                         {"model_type", config.model_type},
                         {"layers", run_layers},
                         {"profile", numerics_profile_name(o.profile)},
                         {"backend", backend->name()},
                         {"threads", ThreadPool::global().size()},
                         {"requests", o.requests},
                         {"prompt_tokens", o.prompt_tokens},
                         {"decode_tokens", o.decode_tokens},
                         {"steps", s.steps},
                         {"load_seconds", load_seconds},
                         {"run_seconds", run_seconds},
                         {"prefill_tokens_per_second", prefill_tps},
                         {"decode_tokens_per_second", decode_tps},
                         {"non_finite_outputs", non_finite},
                         {"cache_bytes_per_token", {{"sparse", sparse_bytes}, {"dense", dense_bytes}}},
                         {"memory_bytes",
                          {{"run_peak_rss", run_peak_rss},
                           {"load_peak_rss", load_peak_rss},
                           {"prepared_weights", weight_bytes},
                           {"cache_pools", cache_bytes},
                           {"model_workspaces", workspace_bytes},
                           {"checkpoint_freed_after_load", checkpoint_bytes}}}};
        for (int st = 0; st < static_cast<int>(Stage::count); ++st)
            j["stage_seconds"][std::string(stage_name(static_cast<Stage>(st)))] = s.stages[static_cast<Stage>(st)];
        out << j.dump(2) << "\n";
    } else {
        fmt::print(out, "model      {} ({}), layers {}, profile {}, backend {}, {} thread(s)\n", source,
                   config.model_type, fmt::join(run_layers, ","), numerics_profile_name(o.profile), backend->name(),
                   ThreadPool::global().size());
        fmt::print(out, "workload   {} request(s) × ({} prompt + {} decode) tokens = {} tokens, {} steps, budget {} tokens/step\n",
                   o.requests, o.prompt_tokens, o.decode_tokens, total_tokens, s.steps, o.max_tokens_per_step);
        fmt::print(out, "load       {:.2f} s\n", load_seconds);
        fmt::print(out, "prefill    {:>10.1f} tokens/s  ({} tokens in {:.2f} s)\n", prefill_tps, s.prefill_tokens,
                   s.prefill_seconds);
        fmt::print(out, "decode     {:>10.1f} tokens/s  ({} tokens in {:.2f} s, {:.1f} ms/step)\n", decode_tps,
                   s.decode_tokens, s.decode_seconds,
                   s.decode_tokens ? 1e3 * s.decode_seconds / static_cast<double>(s.decode_tokens) * o.requests : 0.0);
        fmt::print(out, "stages     ");
        const double total = s.stages.total();
        for (int st = 0; st < static_cast<int>(Stage::count); ++st) {
            const double sec = s.stages[static_cast<Stage>(st)];
            if (sec > 0)
                fmt::print(out, "{} {:.2f} s ({:.0f}%)  ", stage_name(static_cast<Stage>(st)), sec,
                           total > 0 ? 100 * sec / total : 0.0);
        }
        fmt::print(out, "\ncache      {:.1f} B/token over these layers (dense attention: {:.1f} B/token, {:.1f}x)\n",
                   sparse_bytes, dense_bytes, sparse_bytes > 0 ? dense_bytes / sparse_bytes : 0.0);
        fmt::print(out,
                   "memory     peak RSS while running {:.0f} MiB = {:.2f}x the stated {:.0f} MiB (prepared weights {:.0f} + "
                   "cache pools {:.0f} + model workspaces {:.0f}); loading peaked at {:.0f} MiB with the {:.0f} MiB "
                   "checkpoint, freed after loading\n",
                   mib(run_peak_rss), stated_bytes > 0 ? static_cast<double>(run_peak_rss) / stated_bytes : 0.0,
                   mib(stated_bytes), mib(weight_bytes), mib(cache_bytes), mib(workspace_bytes), mib(load_peak_rss),
                   mib(checkpoint_bytes));
        if (non_finite) fmt::print(out, "warning    {} non-finite output values\n", non_finite);
    }
    if (non_finite) return internal_error("{} non-finite values in the last layer's outputs", non_finite);
    return Status::ok();
}

}  // namespace sieve::cli

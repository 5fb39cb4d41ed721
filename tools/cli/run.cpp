#include "run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <malloc.h>
#include <new>
#include <nlohmann/json.hpp>
#include <ostream>
#include <optional>
#include <random>
#include <set>

#include "sieve/backends/backend.h"
#include "core/thread_pool.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/model_factory.h"
#include "presets.h"
#include "sieve/runtime/engine.h"

namespace sieve::cli {

namespace {

// splitmix64's finalizer: a 64-bit mix for the synthetic inputs and the chunk keys.
uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Synthetic attention inputs (unit-variance noise per token); layers are chained, so only the first
// layer's input is asked. The first `shared` tokens are the prompt family's (seeded by it), the rest the
// request's own. Keeps a checksum of the last layer's outputs to show they are finite.
// Each value is a function of (seed, position, index): the scaled sum of four 16-bit uniforms of one
// 64-bit hash (Irwin-Hall, mean 0, variance 1, within ±2√3), a few nanoseconds a value, so that the
// inputs of a long prefill cost the host next to nothing (a per-token Mersenne Twister and normal
// distribution took about 0.3 ms a token at hidden size 7168, more than a GPU's whole layer).
class SyntheticIo final : public RequestIo {
public:
    SyntheticIo(int64_t hidden, int64_t last_layer, uint64_t seed, int64_t shared, uint64_t family_seed)
        : hidden_(hidden), last_(last_layer), seed_(seed), shared_(shared), family_seed_(family_seed) {}
    void input(int64_t, int64_t position, float* row) override {
        const uint64_t base = mix64((position < shared_ ? family_seed_ : seed_) * 1000003 + static_cast<uint64_t>(position));
        constexpr float kScale = 1.7320508f / 65536.0f;  // √3 / 2^16: four uniforms on [0, 2^16) → variance 1
        for (int64_t i = 0; i < hidden_; ++i) {
            const uint64_t h = mix64(base + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
            const int64_t sum = static_cast<int64_t>(h & 0xffff) + static_cast<int64_t>((h >> 16) & 0xffff) +
                                static_cast<int64_t>((h >> 32) & 0xffff) + static_cast<int64_t>(h >> 48);
            row[i] = static_cast<float>(sum - 131070) * kScale;  // 131070 = 4 · 32767.5, the sum's mean
        }
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
    int64_t shared_;
    uint64_t family_seed_;
};

// The chained keys of a prompt's chunks: a chunk inside the shared prefix is its family's, after it the
// request's own (as a hash chain over token ids would be).
std::vector<uint64_t> prompt_chunk_keys(int64_t prompt_tokens, int64_t chunk, int64_t shared, uint64_t family,
                                        uint64_t request) {
    std::vector<uint64_t> keys;
    uint64_t key = 0;
    for (int64_t i = 0; (i + 1) * chunk <= prompt_tokens; ++i) {
        const uint64_t content = (i + 1) * chunk <= shared ? family : request;
        key = mix64(key ^ mix64(content + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1)));
        keys.push_back(key);
    }
    return keys;
}

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

// The machine's physical memory in bytes (0 where the system does not say).
int64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

// The layers to run: --layers, else a preset's default ones, else (empty) every layer sieve runs.
Expected<std::vector<int64_t>> workload_layers(const RunOptions& o, const ModelConfig& config,
                                               const AttentionLayout& layout) {
    if (o.layers.empty()) {
        for (const Preset& p : presets())
            if (o.checkpoint.empty() && p.name == o.preset) return p.default_layers;
        return std::vector<int64_t>{};
    }
    SIEVE_ASSIGN_OR_RETURN(std::vector<int64_t> layers,
                           parse_layer_list(o.layers, static_cast<int64_t>(layout.layers.size())));
    for (int64_t l : layers) {
        const AttentionLayerLayout& layer = layout.layers[static_cast<size_t>(l)];
        if (!layer.sieve_runs)
            return unsupported_error("--layers {}: layer {} of {} is a {} layer, which sieve does not run", o.layers,
                                     l, config.model_type, layer.kind);
    }
    return layers;
}

// The flags' limits keep every count of the workload far inside int64.
static_assert(kRunRequests.hi * (kRunPromptTokens.hi + kRunDecodeTokens.hi) + kRunBudget.hi < (int64_t{1} << 40));

// The workload against the model and the machine: each request within the model's positions, and
// the caches of all requests (every cache group is sized for every request's tokens plus a step's,
// runtime/engine.h) within physical memory, estimated from the layout before anything is
// allocated. Returns the tokens the caches are sized for.
Expected<int64_t> check_workload(const RunOptions& o, const ModelConfig& config, const AttentionLayout& layout,
                                 const std::vector<int64_t>& layers) {
    const int64_t per_request = o.prompt_tokens + o.decode_tokens;
    const int64_t max_position = max_position_embeddings(config);
    if (per_request > max_position)
        return invalid_argument_error(
            "--prompt-tokens {} + --decode-tokens {} = {} tokens per request, more than max_position_embeddings {} "
            "of {}",
            o.prompt_tokens, o.decode_tokens, per_request, max_position, config.model_type);
    const int64_t cache_tokens = o.requests * per_request + o.max_tokens_per_step;
    // In double: a config's entry sizes times these token counts may pass int64.
    double cache_bytes = 0;
    int64_t n_layers = 0;
    const std::set<int64_t> chosen(layers.begin(), layers.end());
    for (const AttentionLayerLayout& l : layout.layers) {
        if (layers.empty() ? !l.sieve_runs || l.mtp : !chosen.count(l.layer)) continue;
        ++n_layers;
        for (const CacheSpec& c : l.caches)
            cache_bytes += static_cast<double>(c.entry_bytes) *
                           static_cast<double>(cache_tokens / std::max<int64_t>(1, c.tokens_per_entry));
    }
    const int64_t memory = physical_memory_bytes();
    if (memory > 0 && cache_bytes > static_cast<double>(memory))
        return out_of_memory_error(
            "the workload needs at least {:.1f} GB of cache ({} request(s) × {} tokens and a step of {} tokens, in {} "
            "layer(s)), more than this machine's {:.1f} GB of memory",
            cache_bytes / 1e9, o.requests, per_request, o.max_tokens_per_step, n_layers,
            static_cast<double>(memory) / 1e9);
    return cache_tokens;
}

}  // namespace

Expected<std::vector<int64_t>> parse_layer_list(std::string_view text, int64_t n_layers) {
    auto malformed = [&] {
        return invalid_argument_error("--layers {}: expected a list like 0-3,7 (non-negative, ascending ranges)", text);
    };
    // A number is checked against the model before any range is expanded: "0-99999999999" must
    // not fill a list of a hundred billion entries.
    auto layer = [&](std::string_view number) -> Expected<int64_t> {
        const std::optional<int64_t> v = parse_decimal(number);
        if (!v || *v < 0 || *v >= n_layers)
            return invalid_argument_error("--layers {}: {} is not a layer of this model (0 to {})", text, number,
                                          n_layers - 1);
        return *v;
    };
    std::vector<bool> chosen(static_cast<size_t>(std::max<int64_t>(n_layers, 0)), false);
    for (size_t start = 0;;) {
        const size_t comma = text.find(',', start);
        const std::string_view part =
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        const size_t dash = part.find('-');
        if (part.empty() || dash == 0 || dash == part.size() - 1) return malformed();
        SIEVE_ASSIGN_OR_RETURN(const int64_t first, layer(part.substr(0, dash)));
        int64_t last = first;
        if (dash != std::string_view::npos) {
            SIEVE_ASSIGN_OR_RETURN(last, layer(part.substr(dash + 1)));
            if (last < first) return malformed();
        }
        for (int64_t v = first; v <= last; ++v) chosen[static_cast<size_t>(v)] = true;
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    std::vector<int64_t> layers;
    for (size_t v = 0; v < chosen.size(); ++v)
        if (chosen[v]) layers.push_back(static_cast<int64_t>(v));
    return layers;
}

namespace {

Status run_checked_workload(const RunOptions& o, std::ostream& out) {
    SIEVE_RETURN_IF_ERROR(check_int_flag("--requests", o.requests, kRunRequests));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--prompt-tokens", o.prompt_tokens, kRunPromptTokens));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--decode-tokens", o.decode_tokens, kRunDecodeTokens));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--budget", o.max_tokens_per_step, kRunBudget));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--draft-tokens", o.draft_tokens, kRunDraftTokens));
    SIEVE_RETURN_IF_ERROR(check_real_flag("--accept-rate", o.accept_rate, kRunAcceptRate));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--shared-prefix", o.shared_prefix, kRunSharedPrefix));
    SIEVE_RETURN_IF_ERROR(check_int_flag("--prompt-families", o.prompt_families, kRunPromptFamilies));
    if (o.shared_prefix > o.prompt_tokens)
        return invalid_argument_error("--shared-prefix {}: the shared part of a prompt, at most --prompt-tokens {}",
                                      o.shared_prefix, o.prompt_tokens);
    SIEVE_RETURN_IF_ERROR(check_backend_flag("--backend", o.backend));
    const auto load_start = std::chrono::steady_clock::now();
    ModelConfig config;
    std::string source;
    if (!o.checkpoint.empty()) {
        SIEVE_ASSIGN_OR_RETURN(config, load_model_config(o.checkpoint));
        source = o.checkpoint.string();
    } else {
        SIEVE_RETURN_IF_ERROR(check_preset_flag("--preset", o.preset));
        SIEVE_ASSIGN_OR_RETURN(config, preset_config(o.preset));
        source = "preset " + o.preset;
    }
    // Everything about the workload is checked against the config before a weight is generated or
    // read, or a cache sized.
    SIEVE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(config, o.profile));
    SIEVE_ASSIGN_OR_RETURN(std::vector<int64_t> layers, workload_layers(o, config, layout));
    SIEVE_ASSIGN_OR_RETURN(const int64_t cache_budget_tokens, check_workload(o, config, layout, layers));
    // The draft model: the MTP layers, with drafts.
    std::vector<int64_t> draft_layers;
    for (const AttentionLayerLayout& l : layout.layers)
        if (l.mtp && o.draft_tokens > 0 && o.draft_model != "none") draft_layers.push_back(l.layer);
    if (o.draft_model == "mtp" && o.draft_tokens > 0 && draft_layers.empty())
        return invalid_argument_error("--draft-model mtp: {} has no MTP layers (its config announces none)", source);
    if (o.draft_model == "mtp" && o.draft_tokens == 0)
        return invalid_argument_error("--draft-model mtp needs --draft-tokens");

    std::unique_ptr<Checkpoint> checkpoint;
    if (!o.checkpoint.empty()) {
        SIEVE_ASSIGN_OR_RETURN(checkpoint, Checkpoint::open(o.checkpoint));
    } else {
        if (o.progress && isatty(STDERR_FILENO))
            fmt::print(stderr, "generating random weights for preset {} (layers {})...\n", o.preset,
                       fmt::join(layers, ","));
        std::vector<int64_t> weights_of = layers;  // a preset's layers: --layers or its default ones, never none
        weights_of.insert(weights_of.end(), draft_layers.begin(), draft_layers.end());
        SIEVE_ASSIGN_OR_RETURN(checkpoint, preset_checkpoint(o.preset, config, weights_of, o.seed));
    }
    SIEVE_ASSIGN_OR_RETURN(auto backend, make_backend(o.backend));
    ModelOptions model_options;
    model_options.profile = o.profile;
    model_options.backend = backend.get();
    model_options.layers = layers;
    SIEVE_ASSIGN_OR_RETURN(auto model, load_attention_model(config, *checkpoint, model_options));
    std::unique_ptr<AttentionModel> draft_model;
    if (!draft_layers.empty()) {
        ModelOptions draft_options = model_options;
        draft_options.layers = draft_layers;
        SIEVE_ASSIGN_OR_RETURN(draft_model, load_attention_model(config, *checkpoint, draft_options));
    }
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
    engine_options.cache_budget_tokens = cache_budget_tokens;
    engine_options.max_cache_bytes = physical_memory_bytes();
    engine_options.scheduler.draft_tokens = o.draft_tokens;
    std::mt19937_64 acceptance(o.seed);
    engine_options.accepted_drafts = [&acceptance, rate = o.accept_rate](RequestId, int64_t, int64_t drafts) {
        std::bernoulli_distribution accept(rate);
        int64_t accepted = 0;
        while (accepted < drafts && accept(acceptance)) ++accepted;
        return accepted;
    };
    engine_options.draft_model = draft_model.get();
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(*model, engine_options));
    std::vector<std::unique_ptr<SyntheticIo>> ios;
    for (int64_t r = 0; r < o.requests; ++r) {
        // Request seeds o.seed + r; family seeds past every request's.
        const uint64_t seed = o.seed + static_cast<uint64_t>(r);
        const uint64_t family = o.seed + static_cast<uint64_t>(o.requests + r % o.prompt_families);
        ios.push_back(std::make_unique<SyntheticIo>(model->hidden_size(), static_cast<int64_t>(run_layers.size()) - 1,
                                                    seed, o.shared_prefix, family));
        std::vector<uint64_t> keys;
        if (o.shared_prefix > 0)
            keys = prompt_chunk_keys(o.prompt_tokens, engine->prefix_chunk_tokens(), o.shared_prefix, family, seed);
        SIEVE_RETURN_IF_ERROR(
            engine->add_request(r, o.prompt_tokens + o.decode_tokens, o.prompt_tokens, ios.back().get(), std::move(keys)));
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
    const std::set<int64_t> ran(run_layers.begin(), run_layers.end());
    double sparse_bytes = 0;
    int64_t ran_layout_layers = 0;
    for (const AttentionLayerLayout& l : layout.layers) {
        if (!ran.count(l.layer)) continue;
        ++ran_layout_layers;
        for (const CacheSpec& c : l.caches) sparse_bytes += cache_bytes_per_token(c);
    }
    int64_t all_attention_layers = 0;
    for (const AttentionLayerLayout& l : layout.layers) all_attention_layers += l.sieve_runs && !l.mtp;
    const double dense_bytes = all_attention_layers
                                   ? layout.dense_cache_bytes_per_token * static_cast<double>(ran_layout_layers) /
                                         static_cast<double>(all_attention_layers)
                                   : 0.0;
    const EngineStats& s = engine->stats();
    const int64_t run_peak_rss = proc_status_bytes("VmHWM");
    const int64_t weight_bytes = static_cast<int64_t>(backend->prepared_weight_bytes());
    // The draft model's caches and workspaces count too (its weights are in the backend's).
    const int64_t workspace_bytes = model->workspace_bytes() + (draft_model ? draft_model->workspace_bytes() : 0);
    int64_t cache_bytes = 0;
    for (const auto& g : engine->cache_groups()) cache_bytes += g->storage_bytes();
    for (const auto& g : engine->draft_cache_groups()) cache_bytes += g->storage_bytes();
    const int64_t stated_bytes = weight_bytes + cache_bytes + workspace_bytes;
    const double prefill_tps = s.prefill_seconds > 0 ? static_cast<double>(s.prefill_tokens) / s.prefill_seconds : 0;
    const double decode_tps = s.decode_seconds > 0 ? static_cast<double>(s.decode_tokens) / s.decode_seconds : 0;
    // Prefix caching: the prompt tokens cached prefixes gave, and the prefill time they would have taken at
    // this run's measured prefill rate (an estimate: the rate of the tokens that were prefilled).
    const double hit_rate = s.keyed_prompt_tokens > 0
                                ? static_cast<double>(s.prefix_hit_tokens) / static_cast<double>(s.keyed_prompt_tokens)
                                : 0.0;
    const double prefill_saved_seconds = prefill_tps > 0 ? static_cast<double>(s.prefix_hit_tokens) / prefill_tps : 0.0;

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
                         {"speculative",
                          {{"draft_tokens", o.draft_tokens},
                           {"accept_rate", o.accept_rate},
                           {"drafted", s.drafted_tokens},
                           {"accepted", s.accepted_draft_tokens},
                           {"decode_steps_saved", s.accepted_draft_tokens},
                           {"draft_model", draft_layers.empty() ? "none" : "mtp"},
                           {"draft_layers", draft_layers},
                           {"draft_steps", s.draft_steps},
                           {"draft_model_tokens", s.draft_model_tokens},
                           {"draft_reused_topk_tokens", s.draft_reused_tokens},
                           {"draft_seconds", s.draft_seconds}}},
                         {"prefix_cache",
                          {{"shared_prefix", o.shared_prefix},
                           {"prompt_families", o.prompt_families},
                           {"chunk_tokens", engine->prefix_chunk_tokens()},
                           {"keyed_prompt_tokens", s.keyed_prompt_tokens},
                           {"hit_tokens", s.prefix_hit_tokens},
                           {"hit_rate", hit_rate},
                           {"requests_hit", s.prefix_hit_requests},
                           {"prefill_seconds_saved_estimate", prefill_saved_seconds}}},
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
        if (o.draft_tokens > 0)
            fmt::print(out, "drafts     {} per decode step, accept rate {:.2f}: {} drafted, {} accepted ({} decode steps saved)\n",
                       o.draft_tokens, o.accept_rate, s.drafted_tokens, s.accepted_draft_tokens, s.accepted_draft_tokens);
        if (!draft_layers.empty())
            fmt::print(out,
                       "draft      MTP layer(s) {}: {} steps over {} tokens, {} of them reusing draft step 0's top-k, "
                       "{:.2f} s\n",
                       fmt::join(draft_layers, ","), s.draft_steps, s.draft_model_tokens, s.draft_reused_tokens,
                       s.draft_seconds);
        else if (o.draft_tokens > 0)
            fmt::print(out, "draft      no draft model (the config has no MTP layers, or --draft-model none): only the "
                            "verification runs\n");
        if (o.shared_prefix > 0)
            fmt::print(out,
                       "prefix     {} of {} prompt tokens from cached prefixes ({:.0f}%, {} of {} requests hit, chunks of "
                       "{} tokens): about {:.2f} s of prefill saved at this run's prefill rate\n",
                       s.prefix_hit_tokens, s.keyed_prompt_tokens, 100 * hit_rate, s.prefix_hit_requests, o.requests,
                       engine->prefix_chunk_tokens(), prefill_saved_seconds);
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

}  // namespace

Status run_workload(const RunOptions& o, std::ostream& out) {
    // The standard containers of loading and of the steps report a failed allocation by throwing:
    // past the checks against the machine's memory, a limit on it (ulimit, cgroups) or its other
    // users can still make one fail, which is an error of the command, not a crash.
    try {
        return run_checked_workload(o, out);
    } catch (const std::bad_alloc&) {
        return out_of_memory_error(
            "ran out of memory for {} request(s) × ({} prompt + {} decode) tokens with a budget of {} tokens per step",
            o.requests, o.prompt_tokens, o.decode_tokens, o.max_tokens_per_step);
    }
}

}  // namespace sieve::cli

#include "bench_layers.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "sieve/backends/backend.h"
#include "backends/cpu/cpu_backend.h"  // the thread sweep is a CPU measurement
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/kv/paged_cache.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/model_factory.h"
#include "sieve/models/registry.h"
#include "presets.h"
#include "sieve/runtime/step_runner.h"

namespace sieve::cli {

namespace {

using Clock = std::chrono::steady_clock;
constexpr RequestId kSeedRequest = 0;  // bench requests are 1 .. batch

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


// The layers one preset is benchmarked on and the config change that makes its dense variant (the
// model family's BenchPlan, models/family.h).
Expected<BenchPlan> family_plan(const std::string& preset, const ModelConfig& config, int64_t max_tokens) {
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    SIEVE_ASSIGN_OR_RETURN(BenchPlan plan, family->bench_plan(config, max_tokens));
    if (plan.layers.empty()) return invalid_argument_error("preset {}: no attention layer to benchmark", preset);
    return plan;
}

// The caches of one model for the sweep: pools sized for `max_requests` requests of `max_tokens`
// tokens (windowed caches only for their window) plus the seed request.
class BenchCaches {
public:
    // Pools for `max_requests` requests of up to `max_tokens` tokens running steps of up to
    // `max_step_tokens` tokens (a windowed cache holds the window and the step's own entries), plus
    // the seed request, whose one prefill step holds all its entries.
    static Expected<BenchCaches> create(const AttentionModel& model, int64_t max_requests, int64_t max_tokens,
                                        int64_t max_step_tokens, int64_t seed_tokens) {
        BenchCaches c;
        for (const CacheGroupDesc& d : model.cache_groups()) {
            auto blocks_for = [&](int64_t tokens, int64_t step_tokens) {
                const int64_t kept =
                    d.spec.window_tokens > 0 ? std::min(tokens, d.spec.window_tokens + step_tokens) : tokens;
                return (kept / d.spec.tokens_per_entry + d.block_size - 1) / d.block_size + 3;
            };
            const int64_t blocks =
                max_requests * blocks_for(max_tokens, max_step_tokens) + blocks_for(seed_tokens, seed_tokens);
            SIEVE_ASSIGN_OR_RETURN(
                auto g, CacheGroup::create(model.backend(), d.name, d.spec, d.block_size, blocks, d.n_layers()));
            c.groups_.push_back(std::move(g));
        }
        return c;
    }

    StepCaches step_caches() const {
        StepCaches s;
        for (const auto& g : groups_) s.groups.push_back(g.get());
        return s;
    }

    // Makes a request of `context` tokens ready for a step of `n_tokens` more, as the engine would
    // have left it (windowed caches hold only what the step can still see).
    Status reserve(RequestId id, int64_t context, int64_t n_tokens) {
        for (const auto& g : groups_) {
            const CacheSpec& spec = g->spec();
            const int64_t total = g->entries_for_tokens(context + n_tokens);
            if (spec.window_tokens == 0) {
                SIEVE_RETURN_IF_ERROR(g->reserve(id, total));
                continue;
            }
            const int64_t keep_from = std::max<int64_t>(0, context - spec.window_tokens) / spec.tokens_per_entry;
            for (int64_t e = 0; e < total;) {  // in steps, so that the pool never holds the whole history
                e = std::min(total, e + g->block_size());
                SIEVE_RETURN_IF_ERROR(g->reserve(id, e));
                g->release_before(id, std::min(keep_from, e));
            }
        }
        return Status::ok();
    }

    // Copies the seed request's written blocks, cyclically, into every resident block of `id`.
    Status fill_from_seed(RequestId id, int64_t seed_tokens) {
        for (const auto& g : groups_) {
            std::vector<int32_t> sources;
            const std::vector<int32_t>& seed = g->block_table(kSeedRequest);
            const int64_t complete = g->entries_for_tokens(seed_tokens) / g->block_size();
            for (size_t b = 0; b < seed.size(); ++b)
                if (seed[b] >= 0 && (g->spec().window_tokens > 0 || static_cast<int64_t>(b) < complete))
                    sources.push_back(seed[b]);
            if (sources.empty())
                for (int32_t b : seed)
                    if (b >= 0) sources.push_back(b);
            if (sources.empty()) continue;
            const std::vector<int32_t>& table = g->block_table(id);
            for (int64_t l = 0; l < g->n_layers(); ++l)
                for (size_t b = 0; b < table.size(); ++b)
                    if (table[b] >= 0) SIEVE_RETURN_IF_ERROR(g->copy_block(l, table[b], sources[b % sources.size()]));
        }
        return Status::ok();
    }

    void free(RequestId id) {
        for (const auto& g : groups_) g->free_request(id);
    }

private:
    std::vector<std::unique_ptr<CacheGroup>> groups_;
};

std::vector<float> random_rows(int64_t n_tokens, int64_t hidden, uint64_t seed) {
    std::vector<float> x(static_cast<size_t>(n_tokens * hidden));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
    return x;
}

struct LoadedModel {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<AttentionModel> model;
};

Expected<LoadedModel> load(const ModelConfig& config, const Checkpoint& checkpoint, const std::vector<int64_t>& layers,
                           const std::string& backend_spec) {
    LoadedModel m;
    SIEVE_ASSIGN_OR_RETURN(m.backend, make_backend(backend_spec));
    ModelOptions o;
    o.profile = NumericsProfile::deployed;
    o.backend = m.backend.get();
    o.layers = layers;
    SIEVE_ASSIGN_OR_RETURN(m.model, load_attention_model(config, checkpoint, o));
    return m;
}

// Evicts this process's data from the caches before a timed layer step: in a real model dozens of
// layers run between two steps of one layer, so none finds its weights or cache rows still in L3 (the
// bench times one to three layers in a loop, and a small layer's weights would otherwise stay
// resident, above the DRAM roofline at short contexts and not at long ones). Reads twice the last
// level cache, 64 MiB when the OS does not say and at most 256 MiB (a VM may report the whole
// socket's L3, 320 MiB here, where a core sees its complex's 32 MiB): reading leaves clean lines,
// which the step's own loads replace without write-backs (writing the buffer made the next step pay
// for flushing it). The pool's threads read it together, so that they are awake when the step starts,
// as the previous layer leaves them in a model; after a single-threaded eviction the step's first
// parallel op paid the workers' wake-up from sleep.
void evict_caches() {
    static const std::vector<uint64_t> buffer = [] {
        const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        const size_t bytes = std::min(l3 > 0 ? 2 * static_cast<size_t>(l3) : size_t{64} << 20, size_t{256} << 20);
        return std::vector<uint64_t>(bytes / sizeof(uint64_t), 1);
    }();
    const int64_t lines = static_cast<int64_t>(buffer.size() / 8);
    ThreadPool::global().parallel_for(lines, [&](int64_t b, int64_t e) {
        uint64_t sum = 0;
        for (int64_t i = b; i < e; ++i) sum += buffer[static_cast<size_t>(i) * 8];  // one word per 64-byte line
        __asm__ volatile("" : : "r"(sum));  // the sum (so the reads) must happen
    });
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// (max − min) / median of the repetitions; 0 when the median is.
double spread_of(const std::vector<double>& v, double median) {
    if (v.empty() || median <= 0) return 0.0;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return (*hi - *lo) / median;
}

// The benchmark's rows: every layer gets the same inputs; the outputs are dropped.
class SameRows final : public StepIo {
public:
    explicit SameRows(const std::vector<float>& x) : x_(x) {}
    void input(int64_t, std::span<float> rows) override { std::copy(x_.begin(), x_.end(), rows.begin()); }
    void output(int64_t, std::span<const float>) override {}

private:
    const std::vector<float>& x_;
};

// Each layer's wall time and stage times, its input evicted from the caches first.
class LayerTimer final : public LayerHook {
public:
    explicit LayerTimer(size_t n_layers) : wall(n_layers), stages(n_layers) {}
    void before_layer(int64_t) override {
        evict_caches();
        times = StageTimes{};
        t0_ = Clock::now();
    }
    void after_layer(int64_t layer_pos) override {
        const double seconds = seconds_since(t0_);
        if (!recording) return;
        wall[static_cast<size_t>(layer_pos)].push_back(seconds);
        stages[static_cast<size_t>(layer_pos)].push_back(times);
    }

    bool recording = false;
    StageTimes times;  // the runner's stage times of the layer running
    std::vector<std::vector<double>> wall;
    std::vector<std::vector<StageTimes>> stages;

private:
    Clock::time_point t0_;
};

// Times every layer of `model` over one step (the layers in order, each on the same inputs, each after
// evict_caches), `reps` times after `warmups` untimed steps; one LayerPoint per layer with the medians.
Expected<std::vector<LayerPoint>> time_step(StepRunner& runner, AttentionModel& model, const StepBatch& batch,
                                            const std::vector<float>& x, int warmups, int reps,
                                            const LayerPoint& proto) {
    const std::vector<int64_t> layers = model.layers();
    SameRows io(x);
    LayerTimer timer(layers.size());
    for (int rep = -warmups; rep < reps; ++rep) {
        timer.recording = rep >= 0;
        SIEVE_RETURN_IF_ERROR(runner.run(batch, io, /*chain=*/false, &timer.times, &timer));
    }
    std::vector<LayerPoint> out;
    for (size_t l = 0; l < layers.size(); ++l) {
        LayerPoint p = proto;
        p.layer = layers[l];
        p.seconds = median_of(timer.wall[l]);
        p.spread = spread_of(timer.wall[l], p.seconds);
        for (size_t s = 0; s < p.stage_seconds.size(); ++s) {
            std::vector<double> v;
            for (const StageTimes& t : timer.stages[l]) v.push_back(t.seconds[s]);
            p.stage_seconds[s] = median_of(v);
        }
        out.push_back(std::move(p));
    }
    return out;
}

// LayerBenchOptions::graph_replay: every layer of the step (planned again here) recorded into its own
// graph, replayed `reps` times after `warmups`, each replay timed on the device after the L2 flush.
Status time_replays(AttentionModel& model, const StepBatch& batch, const std::vector<float>& x, int warmups, int reps,
                    size_t l2_flush_bytes, std::vector<LayerPoint>& points) {
    Backend& backend = model.backend();
    const size_t bytes = x.size() * sizeof(float);
    SIEVE_ASSIGN_OR_RETURN(auto in, backend.buffer_alloc(bytes, BufferUsage::workspace, "a replayed layer's input"));
    SIEVE_ASSIGN_OR_RETURN(auto out, backend.buffer_alloc(bytes, BufferUsage::workspace, "a replayed layer's output"));
    SIEVE_ASSIGN_OR_RETURN(auto flush, backend.buffer_alloc(l2_flush_bytes, BufferUsage::workspace, "the L2 flush"));
    SIEVE_ASSIGN_OR_RETURN(auto timer, backend.stream_timer());
    SIEVE_RETURN_IF_ERROR(backend.buffer_upload(*in, 0, x.data(), bytes));
    SIEVE_RETURN_IF_ERROR(model.plan_step(batch));
    for (size_t l = 0; l < points.size(); ++l) {
        const auto pos = static_cast<int64_t>(l);
        SIEVE_ASSIGN_OR_RETURN(auto graph, backend.capture([&] {
            return model.forward(pos, batch, in->as<float>(), out->as<float>(), nullptr);
        }));
        std::vector<double> w;
        for (int rep = -warmups; rep < reps; ++rep) {
            if (flush->bytes() > 0)
                SIEVE_RETURN_IF_ERROR(backend.buffer_fill(*flush, 0, static_cast<uint8_t>(rep), flush->bytes()));
            SIEVE_RETURN_IF_ERROR(timer->start());
            SIEVE_RETURN_IF_ERROR(graph->replay());
            SIEVE_RETURN_IF_ERROR(timer->stop());
            SIEVE_ASSIGN_OR_RETURN(const double seconds, timer->seconds());
            if (rep >= 0) w.push_back(seconds);
        }
        points[l].replay_seconds = median_of(w);
        points[l].replay_spread = spread_of(w, points[l].replay_seconds);
    }
    return backend.synchronize();
}

}  // namespace

Expected<std::vector<LayerPoint>> run_layer_bench(const LayerBenchOptions& o,
                                                  const std::function<void(const LayerPoint&)>& progress,
                                                  const NoiseJudge& judge) {
    if (o.contexts.empty() || o.batches.empty() || o.reps < 1)
        return invalid_argument_error("layer bench: need at least one context, one batch size and one repetition");
    for (int64_t v : o.contexts)
        if (v < 1) return invalid_argument_error("layer bench: context {} must be ≥ 1", v);
    for (int64_t v : o.batches)
        if (v < 1) return invalid_argument_error("layer bench: batch {} must be ≥ 1", v);
    for (int64_t v : o.prefill_chunks)
        if (v < 1) return invalid_argument_error("layer bench: prefill chunk {} must be ≥ 1", v);
    const bool on_device = !o.backend.empty();
    // The main runs' label (LayerPoint::isa: the ISA, or the device backend's spec) and backend spec.
    const std::string main_label = on_device ? o.backend : o.isa.empty() ? std::string(isa_name(active_isa())) : o.isa;
    const std::string main_spec = on_device ? o.backend : "cpu:" + main_label;
    const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
    int64_t max_tokens = *std::max_element(o.contexts.begin(), o.contexts.end()) + 1;
    for (int64_t c : o.prefill_chunks) max_tokens = std::max(max_tokens, o.prefill_context + c);
    max_tokens = std::max(max_tokens, o.compare_context + 1);
    const int all_threads = ThreadPool::global().size();

    std::vector<LayerPoint> points;
    for (const std::string& preset : o.presets) {
        SIEVE_ASSIGN_OR_RETURN(ModelConfig config, preset_config(preset));
        SIEVE_ASSIGN_OR_RETURN(BenchPlan plan, family_plan(preset, config, max_tokens));
        SIEVE_ASSIGN_OR_RETURN(ModelConfig dense_config,
                               preset_config(preset, nlohmann::json{{plan.dense_field, plan.dense_value}}));
        SIEVE_ASSIGN_OR_RETURN(auto checkpoint, preset_checkpoint(preset, config, plan.layers, o.seed));
        SIEVE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(config, NumericsProfile::deployed));
        auto layer_layout = [&](int64_t layer) -> const AttentionLayerLayout& {
            for (const AttentionLayerLayout& l : layout.layers)
                if (l.layer == layer) return l;
            return layout.layers.front();  // not reached: plan.layers come from the same config
        };
        SIEVE_ASSIGN_OR_RETURN(LoadedModel sparse, load(config, *checkpoint, plan.layers, main_spec));
        LoadedModel dense;  // loaded only where a dense point runs
        if (std::any_of(o.batches.begin(), o.batches.end(), [&](int64_t b) { return b <= o.dense_max_batch; })) {
            SIEVE_ASSIGN_OR_RETURN(dense, load(dense_config, *checkpoint, plan.layers, main_spec));
        }
        LoadedModel other;
        if (!on_device && !o.compare_isa.empty() && o.compare_isa != main_label) {
            SIEVE_ASSIGN_OR_RETURN(other, load(config, *checkpoint, plan.layers, "cpu:" + o.compare_isa));
        }
        AttentionModel& model = *sparse.model;
        const int64_t hidden = model.hidden_size();
        int64_t max_step_tokens = 1;
        for (int64_t c : o.prefill_chunks) max_step_tokens = std::max(max_step_tokens, c);
        SIEVE_ASSIGN_OR_RETURN(BenchCaches caches,
                               BenchCaches::create(model, max_batch, max_tokens, max_step_tokens, o.seed_tokens));

        // The seed: one real prefill whose cache blocks the benchmark's requests copy.
        {
            SIEVE_RETURN_IF_ERROR(caches.reserve(kSeedRequest, 0, o.seed_tokens));
            const StepBatch seed = make_step_batch({{kSeedRequest, 0, o.seed_tokens, false}}, caches.step_caches());
            const std::vector<float> x = random_rows(o.seed_tokens, hidden, o.seed);
            SameRows io(x);
            SIEVE_RETURN_IF_ERROR(StepRunner(model).run(seed, io, /*chain=*/false, nullptr));
        }

        // One step: `batch` requests of `context` tokens each running `n_tokens` tokens; a point per layer.
        auto time_point = [&](AttentionModel& m, const std::string& phase, const std::string& variant,
                              const std::string& isa, int threads, int64_t batch, int64_t context,
                              int64_t n_tokens) -> Expected<std::vector<LayerPoint>> {
            std::vector<StepRequest> requests;
            std::vector<StepRequestShape> shape;
            for (int64_t r = 1; r <= batch; ++r) {
                SIEVE_RETURN_IF_ERROR(caches.reserve(r, context, n_tokens));
                SIEVE_RETURN_IF_ERROR(caches.fill_from_seed(r, o.seed_tokens));
                requests.push_back({r, context, n_tokens, phase == "decode"});
                shape.push_back({context, n_tokens});
            }
            const StepBatch step = make_step_batch(requests, caches.step_caches());
            const std::vector<float> x = random_rows(step.n_tokens(), hidden, o.seed + static_cast<uint64_t>(context));
            LayerPoint proto;
            proto.preset = preset;
            proto.phase = phase;
            proto.variant = variant;
            proto.isa = isa;
            proto.threads = threads;
            proto.batch = batch;
            proto.context = context;
            proto.tokens = step.n_tokens();
            cpu_set_compute_threads(threads);
            // Decode: three warm-up steps, as the first point of a model, after one, read up to 1.6× its
            // neighbours (first-touch of workspaces and of the freshly filled cache blocks). A prefill
            // chunk's one warm-up step already takes longer than that settling.
            const bool decode = phase == "decode";
            StepRunner runner(m);
            auto timed =
                time_step(runner, m, step, x, decode ? 3 : 1, decode ? o.reps : std::max(1, o.reps / 2), proto);
            cpu_set_compute_threads(0);
            if (timed.has_value() && on_device && o.graph_replay) {
                const Status replayed = time_replays(m, step, x, decode ? 3 : 1, decode ? o.reps : std::max(1, o.reps / 2),
                                                     o.l2_flush_bytes, *timed);
                if (!replayed.is_ok()) timed = replayed.with_context("timing the layers replayed from graphs");
            }
            for (int64_t r = 1; r <= batch; ++r) caches.free(r);
            if (!timed.has_value()) return timed.status();
            for (LayerPoint& p : *timed) {
                const AttentionLayerLayout& l = layer_layout(p.layer);
                p.kind = l.kind;
                SIEVE_ASSIGN_OR_RETURN(p.work, layer_step_work(config, l, *checkpoint, shape, variant == "dense"));
                // From avx512_bf16 up the deployed attention forms its products as bf16 products (the cpu
                // backend's tile paths: AMX tiles, or vdpbf16ps register tiles and QSA's vdpbf16ps kernels at
                // avx512_bf16): judged against the matrix peak there, as the indexer is everywhere.
                if (isa == "amx_bf16" || isa == "avx512_bf16")
                    p.work[static_cast<size_t>(Stage::attention)].matrix_math = true;
            }
            return timed;
        };
        auto run_point = [&](AttentionModel& m, const std::string& phase, const std::string& variant,
                             const std::string& isa, int threads, int64_t batch, int64_t context,
                             int64_t n_tokens) -> Status {
            SIEVE_ASSIGN_OR_RETURN(std::vector<LayerPoint> timed,
                                   time_point(m, phase, variant, isa, threads, batch, context, n_tokens));
            for (LayerPoint& p : timed) {
                if (progress) progress(p);
                points.push_back(std::move(p));
            }
            return Status::ok();
        };

        const size_t preset_first = points.size();
        for (int64_t context : o.contexts)
            for (int64_t batch : o.batches) {
                SIEVE_RETURN_IF_ERROR(run_point(model, "decode", "sparse", main_label, all_threads, batch, context, 1));
                if (batch <= o.dense_max_batch)
                    SIEVE_RETURN_IF_ERROR(run_point(*dense.model, "decode", "dense", main_label, all_threads, batch, context, 1));
            }
        const bool thread_compare = !on_device && o.thread_compare && all_threads > 1;
        if (thread_compare) SIEVE_RETURN_IF_ERROR(run_point(model, "decode", "sparse", main_label, 1, 1, o.compare_context, 1));
        const bool compare_point_swept = std::count(o.contexts.begin(), o.contexts.end(), o.compare_context) > 0 &&
                                         std::count(o.batches.begin(), o.batches.end(), 1) > 0;
        if ((other.model || thread_compare) && !compare_point_swept)
            SIEVE_RETURN_IF_ERROR(run_point(model, "decode", "sparse", main_label, all_threads, 1, o.compare_context, 1));
        if (other.model) {
            SIEVE_RETURN_IF_ERROR(
                run_point(*other.model, "decode", "sparse", o.compare_isa, all_threads, 1, o.compare_context, 1));
        }
        for (int64_t chunk : o.prefill_chunks)
            SIEVE_RETURN_IF_ERROR(run_point(model, "prefill", "sparse", main_label, all_threads, 1, o.prefill_context, chunk));

        if (!judge) continue;
        // The second pass: every flagged point is timed once more (one step for all the flagged layers
        // of a step), until none is left that has not been: a replaced point can put a neighbour out of line.
        std::vector<std::string> verdict = judge(points);
        for (;;) {
            size_t i = preset_first;
            while (i < points.size() && (verdict[i].empty() || points[i].retimed)) ++i;
            if (i == points.size()) break;
            const LayerPoint p = points[i];
            AttentionModel& m = p.variant == "dense" ? *dense.model : p.isa != main_label ? *other.model : model;
            SIEVE_ASSIGN_OR_RETURN(std::vector<LayerPoint> again, time_point(m, p.phase, p.variant, p.isa, p.threads,
                                                                             p.batch, p.context, p.tokens / p.batch));
            for (size_t j = i; j < points.size(); ++j) {
                const LayerPoint& q = points[j];
                if (verdict[j].empty() || q.retimed || q.phase != p.phase || q.variant != p.variant || q.isa != p.isa ||
                    q.threads != p.threads || q.batch != p.batch || q.context != p.context || q.tokens != p.tokens)
                    continue;
                for (LayerPoint& candidate : again) {
                    if (candidate.layer != q.layer) continue;
                    candidate.retimed = true;
                    std::vector<LayerPoint> trial = points;
                    trial[j] = candidate;
                    candidate.noise = judge(trial)[j];
                    if (progress) progress(candidate);
                    if (candidate.noise.empty())
                        points[j] = std::move(candidate);
                    else
                        points[j].retimed = true;
                }
            }
            points[i].retimed = true;  // set above already (`again` holds every layer); here so that the loop ends
            verdict = judge(points);
        }
        for (size_t i = preset_first; i < points.size(); ++i) points[i].noise = verdict[i];
    }
    return points;
}

}  // namespace sieve::cli

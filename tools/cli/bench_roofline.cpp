#include "bench_roofline.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "sieve/models/registry.h"

namespace sieve::cli {

namespace {

StageWork& at(StepWork& w, Stage s) { return w[static_cast<size_t>(s)]; }

// Stored bytes of a weight and of its FP8 block scales, if any (io/weights.h names both siblings).
double stored_bytes(const Checkpoint& checkpoint, const AttentionTensor& t) {
    double bytes = 0;
    if (auto v = checkpoint.find(t.name)) {
        bytes += static_cast<double>(v->bytes.size());
    } else {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        bytes += 2.0 * static_cast<double>(n);  // not stored under its canonical name: count it as bf16
    }
    const std::string_view name = t.name;
    if (name.size() > 7 && name.substr(name.size() - 7) == ".weight") {
        const std::string base(name.substr(0, name.size() - 7));
        for (const char* suffix : {".scale", ".weight_scale_inv"})
            if (auto s = checkpoint.find(base + suffix)) bytes += static_cast<double>(s->bytes.size());
    }
    return bytes;
}

}  // namespace

Expected<StepWork> layer_step_work(const ModelConfig& config, const AttentionLayerLayout& layer,
                                   const Checkpoint& checkpoint, const std::vector<StepRequestShape>& step, bool dense) {
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    StepWork w{};
    int64_t n_tokens = 0;
    for (const StepRequestShape& r : step) n_tokens += r.n_tokens;
    const double N = static_cast<double>(n_tokens);

    // Weights: stored bytes once per step, 2 flops per weight element and token, in the stages the
    // family runs them in.
    for (const AttentionTensor& t : layer.tensors) {
        if (t.shape.size() != 2) continue;  // norms, sinks, biases: negligible
        const double elements = static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
        const double bytes = stored_bytes(checkpoint, t);
        for (const WeightShare& ws : family->weight_stages(config, t.name)) {
            if (dense && ws.stage == Stage::indexer) continue;  // the dense variant runs no indexer
            StageWork& s = at(w, ws.stage);
            s.weight_bytes += ws.share * bytes;
            s.weight_flops += 2 * ws.share * elements * N;
        }
    }
    for (StageWork& s : w) s.bytes = s.weight_bytes, s.flops = s.weight_flops;
    at(w, Stage::indexer).matrix_math = true;

    // Per-request cache streams.
    for (const StepRequestShape& r : step) {
        const int64_t end = r.start + r.n_tokens;
        for (int64_t p = r.start; p < end; ++p) {
            const TokenWork t = family->token_work(config, layer, p, dense);
            at(w, Stage::attention).bytes += t.rows * t.row_bytes;
            at(w, Stage::attention).flops += t.rows * t.flops_per_row;
            at(w, Stage::indexer).flops += t.candidates * t.index_flops_per_candidate;
            at(w, Stage::topk).bytes += 4.0 * t.candidates;
        }
        // Each request's indexer keys, read once for all its tokens.
        at(w, Stage::indexer).bytes += family->request_key_bytes(config, layer, end, dense);
    }
    return w;
}

namespace {

// Memory-bound when the memory-bound parts make up at least half of the time.
StageRoofline judged(double seconds, double memory_seconds) {
    return {seconds, seconds > 0 && memory_seconds >= 0.5 * seconds};
}

}  // namespace

StageRoofline stage_roofline(const StageWork& w, double bandwidth, double matrix_peak, double fma_peak) {
    if (bandwidth <= 0 || matrix_peak <= 0 || fma_peak <= 0) return {};
    const double cache_peak = w.matrix_math ? matrix_peak : fma_peak;
    const double wm = w.weight_bytes / bandwidth, wf = w.weight_flops / matrix_peak;
    const double cm = (w.bytes - w.weight_bytes) / bandwidth, cf = (w.flops - w.weight_flops) / cache_peak;
    const double weights = std::max(wm, wf), cache = std::max(cm, cf);
    return judged(weights + cache, (wm >= wf ? weights : 0.0) + (cm >= cf ? cache : 0.0));
}

StageRoofline step_roofline(const StepWork& w, double bandwidth, double matrix_peak, double fma_peak) {
    double seconds = 0, memory_seconds = 0;
    for (const StageWork& s : w) {
        const StageRoofline r = stage_roofline(s, bandwidth, matrix_peak, fma_peak);
        seconds += r.seconds;
        if (r.memory_bound) memory_seconds += r.seconds;
    }
    return judged(seconds, memory_seconds);
}

}  // namespace sieve::cli

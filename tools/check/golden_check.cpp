#include "golden_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "backends/backend.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/model_factory.h"
#include "runtime/engine.h"

namespace sieve {

namespace {

// One request of the fixture: its captured tensors per layer position, and what sieve produced.
struct GoldenRequest {
    int64_t n_tokens = 0;
    std::vector<Tensor> inputs;   // [layer_pos] [T, hidden]
    std::vector<Tensor> outputs;  // [layer_pos] [T, hidden]
    std::vector<Tensor> topk;     // [layer_pos] [T, K] i32, or empty tensor when absent
    std::vector<std::vector<float>> produced;  // [layer_pos] [T · hidden]
};

class GoldenIo final : public RequestIo {
public:
    GoldenIo(GoldenRequest& r, int64_t hidden) : r_(r), hidden_(hidden) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        const float* src = r_.inputs[static_cast<size_t>(layer_pos)].as<float>() + position * hidden_;
        std::copy(src, src + hidden_, row);
    }
    void output(int64_t layer_pos, int64_t position, const float* row) override {
        std::copy(row, row + hidden_, r_.produced[static_cast<size_t>(layer_pos)].data() + position * hidden_);
    }

private:
    GoldenRequest& r_;
    int64_t hidden_;
};

// Random inputs with one NaN: a request whose outputs nobody checks, mixed into the steps to show
// that it cannot disturb the others (issue: "a NaN in one request's inputs never changes another
// request's outputs").
class NoiseIo final : public RequestIo {
public:
    NoiseIo(int64_t hidden, uint64_t seed) : hidden_(hidden), rng_(seed) {}
    void input(int64_t, int64_t position, float* row) override {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int64_t i = 0; i < hidden_; ++i) row[i] = normal(rng_);
        if (position % 7 == 3) row[0] = std::nanf("");
    }
    void output(int64_t, int64_t, const float*) override {}

private:
    int64_t hidden_;
    std::mt19937_64 rng_;
};

// The reference's selected set of a token (entries < 0 mean none).
std::set<int32_t> reference_set(const Tensor& topk, int64_t position) {
    std::set<int32_t> s;
    const int64_t k = topk.dim(1);
    const int32_t* row = topk.as<int32_t>() + position * k;
    for (int64_t j = 0; j < k; ++j)
        if (row[j] >= 0) s.insert(row[j]);
    return s;
}

struct TopkTally {
    int64_t tokens = 0, equal = 0, ties = 0;
};

// Compares each selection with the reference's; substitutes the reference's choice for tie tokens
// (golden_format.md "Exact score ties").
class GoldenSelectionObserver final : public SelectionObserver {
public:
    GoldenSelectionObserver(std::map<RequestId, GoldenRequest>& requests, const std::vector<int64_t>& layers,
                            bool substitute_ties)
        : requests_(requests), substitute_ties_(substitute_ties) {
        for (size_t i = 0; i < layers.size(); ++i) layer_pos_[layers[i]] = static_cast<int64_t>(i);
    }

    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t tokens_per_score) override {
        auto r = requests_.find(request);
        auto lp = layer_pos_.find(layer);
        if (r == requests_.end() || lp == layer_pos_.end()) return;  // noise request, or a layer not captured
        const Tensor& topk = r->second.topk[static_cast<size_t>(lp->second)];
        if (topk.numel() == 0) return;
        TopkTally& tally = tallies_[{request, layer}];
        ++tally.tokens;
        const std::set<int32_t> ref = reference_set(topk, position);
        std::set<int32_t> mine;
        for (int32_t i : selected)
            if (i >= 0) mine.insert(i);
        if (mine == ref) {
            ++tally.equal;
            return;
        }
        if (!is_tie(mine, ref, scores, std::max<int64_t>(1, tokens_per_score))) return;
        ++tally.ties;
        ++tally.equal;
        if (!substitute_ties_ || static_cast<int64_t>(ref.size()) > static_cast<int64_t>(selected.size())) return;
        size_t j = 0;
        for (int32_t i : ref) selected[j++] = i;
        for (; j < selected.size(); ++j) selected[j] = -1;
    }

    TopkTally tally(RequestId request, int64_t layer) const {
        auto it = tallies_.find({request, layer});
        return it == tallies_.end() ? TopkTally{} : it->second;
    }

private:
    // The sets differ only by candidates whose score is within 1e-5 × max|score| of sieve's own
    // k-th (lowest selected) score.
    static bool is_tie(const std::set<int32_t>& mine, const std::set<int32_t>& ref, std::span<const float> scores,
                       int64_t per) {
        if (scores.empty()) return false;
        auto score_of = [&](int32_t i) -> std::optional<float> {
            const int64_t s = i / per;
            if (s < 0 || s >= static_cast<int64_t>(scores.size())) return std::nullopt;
            return scores[static_cast<size_t>(s)];
        };
        float max_abs = 0, kth = INFINITY;
        for (float s : scores)
            if (std::isfinite(s)) max_abs = std::max(max_abs, std::fabs(s));
        for (int32_t i : mine)
            if (auto s = score_of(i)) kth = std::min(kth, *s);
        if (!std::isfinite(kth)) return false;
        const float slack = 1e-5f * max_abs;
        auto near_kth = [&](int32_t i) {
            auto s = score_of(i);
            return s && std::fabs(*s - kth) <= slack;
        };
        for (int32_t i : mine)
            if (!ref.count(i) && !near_kth(i)) return false;
        for (int32_t i : ref)
            if (!mine.count(i) && !near_kth(i)) return false;
        return true;
    }

    std::map<RequestId, GoldenRequest>& requests_;
    bool substitute_ties_;
    std::map<int64_t, int64_t> layer_pos_;
    std::map<std::pair<RequestId, int64_t>, TopkTally> tallies_;
};

Expected<Tensor> golden_tensor(const SafetensorsFile& golden, const std::string& name, DType dtype) {
    SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView v, golden.tensor(name));
    if (v.dtype != dtype)
        return corrupt_error("{}: tensor {} is {}, expected {}", golden.file_name(), name, v.dtype_string,
                             dtype_name(dtype));
    return read_tensor(v, dtype);
}

Expected<EngineOptions> schedule_options(const std::string& schedule, int64_t longest, uint64_t seed,
                                         std::vector<int64_t>& prompt_tokens) {
    EngineOptions o;
    o.cache_budget_tokens = 4 * longest + 64;
    SchedulerOptions& s = o.scheduler;
    if (schedule == "one-shot") {
        s.max_tokens_per_step = longest;
        s.max_requests_per_step = 1;
        return o;
    }
    if (schedule == "decode") {
        for (int64_t& p : prompt_tokens) p = 1;
        s.max_tokens_per_step = static_cast<int64_t>(prompt_tokens.size());
        return o;
    }
    if (schedule.rfind("chunk:", 0) == 0) {
        int64_t n = 0;
        try {
            n = std::stoll(schedule.substr(6));
        } catch (...) {
            n = 0;
        }
        if (n < 1) return invalid_argument_error("schedule {}: the chunk size must be a positive integer", schedule);
        s.max_tokens_per_step = n;
        s.max_requests_per_step = 1;
        return o;
    }
    if (schedule == "mixed") {
        auto rng = std::make_shared<std::mt19937_64>(seed);
        for (int64_t& p : prompt_tokens) p = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, p))(*rng);
        s.max_tokens_per_step = 13;  // small and odd: steps mix decodes with pieces of several prefills
        s.chunk_policy = [rng](RequestId, int64_t limit) {
            return std::uniform_int_distribution<int64_t>(1, limit)(*rng);
        };
        return o;
    }
    return invalid_argument_error("unknown schedule {} (expected one-shot, chunk:N, decode or mixed)", schedule);
}

}  // namespace

CheckTolerances default_check_tolerances(NumericsProfile profile, const std::string& model_type) {
    if (profile == NumericsProfile::exact) return {};
    if (model_type == "deepseek_v4") return {0.12, 0.85};
    if (model_type == "deepseek_v32" || model_type == "hy_v4") return {0.35, 0.0};
    return {0.15, 0.97};  // qwen4_exp, qwen4_exp_text
}

Expected<CheckReport> run_golden_check(const std::filesystem::path& fixture_dir, const CheckOptions& options) {
    const auto ckpt_dir = fixture_dir / "ckpt";
    SIEVE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto golden, SafetensorsFile::open(fixture_dir / "golden.safetensors"));
    const auto& meta = golden->metadata();
    if (!meta.count("format") || meta.at("format") != "sieve-golden/1")
        return corrupt_error("{}: metadata \"format\" is not sieve-golden/1", golden->file_name());
    if (!meta.count("requests")) return corrupt_error("{}: metadata has no \"requests\"", golden->file_name());
    int64_t n_requests = 0;
    try {
        n_requests = std::stoll(meta.at("requests"));
    } catch (...) {
        return corrupt_error("{}: metadata \"requests\" = {} is not a number", golden->file_name(), meta.at("requests"));
    }

    SIEVE_ASSIGN_OR_RETURN(auto backend, make_backend(options.backend));
    ModelOptions model_options;
    model_options.profile = options.profile;
    model_options.backend = backend.get();
    SIEVE_ASSIGN_OR_RETURN(auto model, load_attention_model(config, *checkpoint, model_options));
    const std::vector<int64_t> layers = model->layers();
    const int64_t hidden = model->hidden_size();

    std::map<RequestId, GoldenRequest> requests;
    int64_t longest = 1;
    for (int64_t r = 0; r < n_requests; ++r) {
        GoldenRequest g;
        SIEVE_ASSIGN_OR_RETURN(Tensor positions, golden_tensor(*golden, fmt::format("req{}.positions", r), DType::i64));
        g.n_tokens = positions.numel();
        for (int64_t t = 0; t < g.n_tokens; ++t)
            if (positions.as<int64_t>()[t] != t)
                return unsupported_error("{}: req{}.positions[{}] = {}: only positions 0..T-1 are supported",
                                         golden->file_name(), r, t, positions.as<int64_t>()[t]);
        for (int64_t layer : layers) {
            const std::string base = fmt::format("req{}.layer{}", r, layer);
            SIEVE_ASSIGN_OR_RETURN(Tensor in, golden_tensor(*golden, base + ".input", DType::f32));
            SIEVE_ASSIGN_OR_RETURN(Tensor out, golden_tensor(*golden, base + ".output", DType::f32));
            const Shape want{g.n_tokens, hidden};
            if (in.shape() != want || out.shape() != want)
                return corrupt_error("{}: {}.input/.output have shapes {} / {}, expected {}", golden->file_name(), base,
                                     shape_to_string(in.shape()), shape_to_string(out.shape()), shape_to_string(want));
            g.inputs.push_back(std::move(in));
            g.outputs.push_back(std::move(out));
            Tensor topk;
            if (golden->find(base + ".topk")) {
                SIEVE_ASSIGN_OR_RETURN(topk, golden_tensor(*golden, base + ".topk", DType::i32));
                if (topk.rank() != 2 || topk.dim(0) != g.n_tokens)
                    return corrupt_error("{}: {}.topk has shape {}", golden->file_name(), base,
                                         shape_to_string(topk.shape()));
            }
            g.topk.push_back(std::move(topk));
            g.produced.emplace_back(static_cast<size_t>(g.n_tokens * hidden), std::nanf(""));
        }
        longest = std::max(longest, g.n_tokens);
        requests.emplace(r, std::move(g));
    }

    std::vector<int64_t> prompt_tokens;
    for (const auto& [id, g] : requests) prompt_tokens.push_back(g.n_tokens);
    SIEVE_ASSIGN_OR_RETURN(EngineOptions engine_options,
                           schedule_options(options.schedule, longest, options.seed, prompt_tokens));
    GoldenSelectionObserver observer(requests, layers, options.profile == NumericsProfile::exact);
    model->set_selection_observer(&observer);
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(*model, engine_options));

    std::vector<std::unique_ptr<RequestIo>> ios;
    size_t i = 0;
    for (auto& [id, g] : requests) {
        ios.push_back(std::make_unique<GoldenIo>(g, hidden));
        SIEVE_RETURN_IF_ERROR(engine->add_request(id, g.n_tokens, prompt_tokens[i++], ios.back().get()));
    }
    if (options.schedule == "mixed") {
        ios.push_back(std::make_unique<NoiseIo>(hidden, options.seed));
        SIEVE_RETURN_IF_ERROR(engine->add_request(n_requests, longest, longest / 2, ios.back().get()));
    }
    SIEVE_RETURN_IF_ERROR(engine->run());
    model->set_selection_observer(nullptr);
    for (const auto& [id, g] : requests)
        if (engine->status(id) != RequestStatus::finished)
            return engine->error(id).with_context(fmt::format("request {}", id));

    CheckReport report;
    report.model_type = config.model_type;
    report.schedule = options.schedule;
    report.passed = true;
    for (const auto& [id, g] : requests) {
        for (size_t lp = 0; lp < layers.size(); ++lp) {
            LayerCheck c;
            c.request = id;
            c.layer = layers[lp];
            c.tokens = g.n_tokens;
            const float* ref = g.outputs[lp].as<float>();
            const std::vector<float>& got = g.produced[lp];
            double diff2 = 0, ref2 = 0;
            bool finite = true;
            for (size_t k = 0; k < got.size(); ++k) {
                const double d = static_cast<double>(got[k]) - ref[k];
                finite &= std::isfinite(got[k]);
                c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(d));
                diff2 += d * d;
                ref2 += static_cast<double>(ref[k]) * ref[k];
            }
            c.rel_error = finite ? std::sqrt(diff2 / std::max(ref2, 1e-300)) : INFINITY;
            if (!finite) c.max_abs_diff = INFINITY;
            const TopkTally t = observer.tally(id, c.layer);
            c.topk_tokens = t.tokens;
            c.topk_equal = t.equal;
            c.tie_tokens = t.ties;
            // Every token of a layer with a captured top-k must have reported its selection.
            const bool topk_seen = g.topk[lp].numel() == 0 || t.tokens == g.n_tokens;
            const double agreement = t.tokens ? static_cast<double>(t.equal) / static_cast<double>(t.tokens) : 1.0;
            c.passed = finite && c.rel_error <= options.rel_tolerance && topk_seen &&
                       agreement >= options.min_topk_agreement;
            report.passed &= c.passed;
            report.layers.push_back(c);
        }
    }
    return report;
}

}  // namespace sieve

#include "golden_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "backends/backend.h"
#include "golden_fixture.h"
#include "golden_selection.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "models/model_factory.h"
#include "models/registry.h"
#include "runtime/engine.h"

namespace sieve {

namespace {

// One request of the fixture, and what sieve produced for it.
struct CheckedRequest {
    const GoldenRequest* golden = nullptr;
    std::vector<std::vector<float>> produced;  // [layer_pos] [T · hidden]
};

class GoldenIo final : public RequestIo {
public:
    GoldenIo(CheckedRequest& r, int64_t hidden) : r_(r), hidden_(hidden) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        const float* src = r_.golden->layers[static_cast<size_t>(layer_pos)].input.as<float>() + position * hidden_;
        std::copy(src, src + hidden_, row);
    }
    void output(int64_t layer_pos, int64_t position, const float* row) override {
        std::copy(row, row + hidden_, r_.produced[static_cast<size_t>(layer_pos)].data() + position * hidden_);
    }

private:
    CheckedRequest& r_;
    int64_t hidden_;
};

// Random inputs with one NaN: a request whose outputs nobody checks, mixed into the steps to show
// that it cannot disturb the others ("a NaN in one request's inputs never changes another
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

struct TopkTally {
    int64_t tokens = 0, equal = 0, ties = 0, nonfinite = 0, constant = 0;
};

// Judges each selection against the reference's (golden_selection.h); in the exact profile,
// substitutes the reference's choice for tie tokens (golden_format.md "Exact score ties").
class GoldenSelectionObserver final : public SelectionObserver {
public:
    GoldenSelectionObserver(const std::map<RequestId, CheckedRequest>& requests, const std::vector<int64_t>& layers,
                            bool substitute_ties)
        : requests_(requests), substitute_ties_(substitute_ties) {
        for (size_t i = 0; i < layers.size(); ++i) layer_pos_[layers[i]] = i;
    }

    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t tokens_per_score) override {
        auto r = requests_.find(request);
        auto lp = layer_pos_.find(layer);
        if (r == requests_.end() || lp == layer_pos_.end()) return;  // noise request, or a layer not captured
        const GoldenLayer& golden = r->second.golden->layers[lp->second];
        if (!golden.has_topk) return;
        TopkTally& tally = tallies_[{request, layer}];
        ++tally.tokens;
        const std::vector<int32_t>& ref = golden.topk.sets[static_cast<size_t>(position)];
        switch (judge_selection(selected, ref, scores, tokens_per_score)) {
            case SelectionVerdict::equal: ++tally.equal; return;
            case SelectionVerdict::differs: return;
            case SelectionVerdict::nonfinite_scores: ++tally.nonfinite; return;
            case SelectionVerdict::constant_scores: ++tally.constant; return;
            case SelectionVerdict::tie: break;
        }
        ++tally.ties;
        ++tally.equal;
        if (!substitute_ties_ || ref.size() > selected.size()) return;
        std::copy(ref.begin(), ref.end(), selected.begin());
        std::fill(selected.begin() + static_cast<std::ptrdiff_t>(ref.size()), selected.end(), -1);
    }

    TopkTally tally(RequestId request, int64_t layer) const {
        auto it = tallies_.find({request, layer});
        return it == tallies_.end() ? TopkTally{} : it->second;
    }

private:
    const std::map<RequestId, CheckedRequest>& requests_;
    bool substitute_ties_;
    std::map<int64_t, size_t> layer_pos_;
    std::map<std::pair<RequestId, int64_t>, TopkTally> tallies_;
};

std::string tokens_with(int64_t n, const char* what) {
    return fmt::format("{} token{} with {}", n, n == 1 ? "" : "s", what);
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

void judge_layer(LayerCheck& c, bool has_reference_topk, const CheckOptions& options) {
    std::vector<std::string> reasons;
    if (c.nonfinite_outputs > 0) reasons.push_back(fmt::format("{} non-finite output values", c.nonfinite_outputs));
    else if (!(c.rel_error <= options.rel_tolerance))
        reasons.push_back(fmt::format("rel error {:.2e} > {:.3g}", c.rel_error, options.rel_tolerance));
    if (has_reference_topk) {
        // Every token of a layer with a captured top-k must have reported its selection.
        if (c.topk_tokens != c.tokens)
            reasons.push_back(fmt::format("top-k reported for {} of {} tokens", c.topk_tokens, c.tokens));
        if (c.nonfinite_score_tokens > 0)
            reasons.push_back(tokens_with(c.nonfinite_score_tokens, "non-finite index scores"));
        if (c.constant_score_tokens > 0)
            reasons.push_back(tokens_with(c.constant_score_tokens, "constant index scores"));
        if (static_cast<double>(c.tie_tokens) > options.max_tie_fraction * static_cast<double>(c.topk_tokens))
            reasons.push_back(
                fmt::format("ties {}/{} > {:g}%", c.tie_tokens, c.topk_tokens, 100 * options.max_tie_fraction));
        const double agreement =
            c.topk_tokens ? static_cast<double>(c.topk_equal) / static_cast<double>(c.topk_tokens) : 1.0;
        if (agreement < options.min_topk_agreement)
            reasons.push_back(fmt::format("top-k equal on {}/{} tokens < {:.2f}", c.topk_equal, c.topk_tokens,
                                          options.min_topk_agreement));
    }
    c.passed = reasons.empty();
    c.reason = fmt::format("{}", fmt::join(reasons, "; "));
}

CheckTolerances default_check_tolerances(NumericsProfile profile, const std::string& model_type) {
    auto family = model_family(model_type);
    // A model_type sieve does not run fails at load; until then it is held to the exact defaults.
    if (profile == NumericsProfile::exact || !family.has_value()) return {};
    const DeployedCheckDefaults& d = (*family)->deployed_check;
    return {d.max_relative_error, d.min_topk_agreement};
}

Expected<CheckReport> run_golden_check(const std::filesystem::path& fixture_dir, const CheckOptions& options) {
    if (!(options.max_tie_fraction >= 0.0 && options.max_tie_fraction <= 1.0))
        return invalid_argument_error("the largest tie fraction {} is not in [0, 1]", options.max_tie_fraction);
    const auto ckpt_dir = fixture_dir / "ckpt";
    SIEVE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto backend, make_backend(options.backend));
    ModelOptions model_options;
    model_options.profile = options.profile;
    model_options.backend = backend.get();
    SIEVE_ASSIGN_OR_RETURN(auto model, load_attention_model(config, *checkpoint, model_options));
    const std::vector<int64_t> layers = model->layers();
    const int64_t hidden = model->hidden_size();
    SIEVE_ASSIGN_OR_RETURN(const GoldenFixture fixture,
                           read_golden_fixture(fixture_dir / "golden.safetensors", config, layers, hidden));

    std::map<RequestId, CheckedRequest> requests;
    int64_t longest = 1;
    for (size_t r = 0; r < fixture.requests.size(); ++r) {
        CheckedRequest c;
        c.golden = &fixture.requests[r];
        const int64_t n = c.golden->n_tokens;
        c.produced.assign(layers.size(), std::vector<float>(static_cast<size_t>(n * hidden), std::nanf("")));
        longest = std::max(longest, n);
        requests.emplace(static_cast<RequestId>(r), std::move(c));
    }

    std::vector<int64_t> prompt_tokens;
    for (const auto& [id, c] : requests) prompt_tokens.push_back(c.golden->n_tokens);
    SIEVE_ASSIGN_OR_RETURN(EngineOptions engine_options,
                           schedule_options(options.schedule, longest, options.seed, prompt_tokens));
    GoldenSelectionObserver observer(requests, layers, options.profile == NumericsProfile::exact);
    model->set_selection_observer(&observer);
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(*model, engine_options));

    std::vector<std::unique_ptr<RequestIo>> ios;
    size_t i = 0;
    for (auto& [id, c] : requests) {
        ios.push_back(std::make_unique<GoldenIo>(c, hidden));
        SIEVE_RETURN_IF_ERROR(engine->add_request(id, c.golden->n_tokens, prompt_tokens[i++], ios.back().get()));
    }
    if (options.schedule == "mixed") {
        ios.push_back(std::make_unique<NoiseIo>(hidden, options.seed));
        SIEVE_RETURN_IF_ERROR(engine->add_request(static_cast<RequestId>(requests.size()), longest, longest / 2,
                                                  ios.back().get()));
    }
    SIEVE_RETURN_IF_ERROR(engine->run());
    model->set_selection_observer(nullptr);
    for (const auto& [id, c] : requests)
        if (engine->status(id) != RequestStatus::finished)
            return engine->error(id).with_context(fmt::format("request {}", id));

    CheckReport report;
    report.model_type = config.model_type;
    report.schedule = options.schedule;
    report.max_tie_fraction = options.max_tie_fraction;
    report.passed = true;
    for (const auto& [id, c] : requests) {
        for (size_t lp = 0; lp < layers.size(); ++lp) {
            const GoldenLayer& golden = c.golden->layers[lp];
            LayerCheck check;
            check.request = id;
            check.layer = layers[lp];
            check.tokens = c.golden->n_tokens;
            const float* ref = golden.output.as<float>();
            const std::vector<float>& got = c.produced[lp];
            double diff2 = 0, ref2 = 0;
            for (size_t k = 0; k < got.size(); ++k) {
                const double d = static_cast<double>(got[k]) - ref[k];
                check.nonfinite_outputs += !std::isfinite(got[k]);
                check.max_abs_diff = std::max(check.max_abs_diff, std::fabs(d));
                diff2 += d * d;
                ref2 += static_cast<double>(ref[k]) * ref[k];
            }
            // ref2 > 0: read_golden_fixture refuses an all-zero reference output.
            check.rel_error = check.nonfinite_outputs ? INFINITY : std::sqrt(diff2 / ref2);
            if (check.nonfinite_outputs) check.max_abs_diff = INFINITY;
            const TopkTally t = observer.tally(id, check.layer);
            check.topk_tokens = t.tokens;
            check.topk_equal = t.equal;
            check.tie_tokens = t.ties;
            check.nonfinite_score_tokens = t.nonfinite;
            check.constant_score_tokens = t.constant;
            check.reference_none_entries = golden.has_topk ? golden.topk.none_entries : 0;
            judge_layer(check, golden.has_topk, options);
            report.passed &= check.passed;
            report.layers.push_back(std::move(check));
        }
    }
    return report;
}

}  // namespace sieve

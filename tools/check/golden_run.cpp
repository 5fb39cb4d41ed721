#include "golden_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

namespace sieve {

namespace {

class RunIo final : public RequestIo {
public:
    RunIo(const GoldenRunRequest& in, GoldenRequestRun& out, int64_t hidden) : in_(in), out_(out), hidden_(hidden) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        const float* src = in_.inputs[static_cast<size_t>(layer_pos)].data() + position * hidden_;
        std::copy(src, src + hidden_, row);
    }
    void output(int64_t layer_pos, int64_t position, const float* row) override {
        std::copy(row, row + hidden_, out_.outputs[static_cast<size_t>(layer_pos)].data() + position * hidden_);
    }

private:
    const GoldenRunRequest& in_;
    GoldenRequestRun& out_;
    int64_t hidden_;
};

// Random inputs with one NaN every 7 tokens, outputs dropped (GoldenSchedule::noise_request).
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

class Recorder final : public SelectionObserver {
public:
    Recorder(GoldenRun& run, const SelectionRewrite& rewrite) : run_(run), rewrite_(rewrite) {
        for (size_t i = 0; i < run.layers.size(); ++i) layer_pos_[run.layers[i]] = i;
    }
    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t tokens_per_score) override {
        auto lp = layer_pos_.find(layer);
        if (request < 0 || request >= static_cast<RequestId>(run_.requests.size()) || lp == layer_pos_.end())
            return;  // the noise request
        SelectionRecord& r = run_.requests[static_cast<size_t>(request)].selections[lp->second][position];
        r.selected.assign(selected.begin(), selected.end());
        r.scores.assign(scores.begin(), scores.end());
        r.tokens_per_score = tokens_per_score;
        ++r.reports;
        if (rewrite_) rewrite_(request, layer, position, selected, scores, tokens_per_score);
    }

private:
    GoldenRun& run_;
    const SelectionRewrite& rewrite_;
    std::map<int64_t, size_t> layer_pos_;
};

// Stops observing when the run ends, however it ends: the observer lives on the run's stack.
struct ObserverScope {
    AttentionModel& model;
    ObserverScope(AttentionModel& m, SelectionObserver* o) : model(m) { model.set_selection_observer(o); }
    ~ObserverScope() { model.set_selection_observer(nullptr); }
};

int64_t longest_request(std::span<const int64_t> n_tokens) {
    int64_t longest = 1;
    for (int64_t n : n_tokens) longest = std::max(longest, n);
    return longest;
}

}  // namespace

std::set<int32_t> SelectionRecord::set() const {
    std::set<int32_t> s;
    for (int32_t i : selected)
        if (i >= 0) s.insert(i);
    return s;
}

Expected<GoldenSchedule> golden_schedule(const std::string& name, std::span<const int64_t> n_tokens, uint64_t seed) {
    const int64_t longest = longest_request(n_tokens);
    GoldenSchedule o;
    o.name = name;
    o.engine.cache_budget_tokens = 4 * longest + 64;
    o.prompt_tokens.assign(n_tokens.begin(), n_tokens.end());
    SchedulerOptions& s = o.engine.scheduler;
    if (name == "one-shot") {
        s.max_tokens_per_step = longest;
        s.max_requests_per_step = 1;
        return o;
    }
    if (name == "decode") {
        for (int64_t& p : o.prompt_tokens) p = 1;
        s.max_tokens_per_step = static_cast<int64_t>(n_tokens.size());
        return o;
    }
    if (name.rfind("chunk:", 0) == 0) {
        int64_t n = 0;
        try {
            n = std::stoll(name.substr(6));
        } catch (...) {
            n = 0;
        }
        if (n < 1) return invalid_argument_error("schedule {}: the chunk size must be a positive integer", name);
        s.max_tokens_per_step = n;
        s.max_requests_per_step = 1;
        return o;
    }
    if (name == "mixed") {
        auto rng = std::make_shared<std::mt19937_64>(seed);
        for (int64_t& p : o.prompt_tokens) p = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, p))(*rng);
        s.max_tokens_per_step = 13;  // small and odd: steps mix decodes with pieces of several prefills
        s.chunk_policy = [rng](RequestId, int64_t limit) {
            return std::uniform_int_distribution<int64_t>(1, limit)(*rng);
        };
        o.noise_request = true;
        o.noise_seed = seed;
        return o;
    }
    return invalid_argument_error("unknown schedule {} (expected one-shot, chunk:N, decode or mixed)", name);
}

Expected<GoldenRun> run_golden_requests(AttentionModel& model, std::span<const GoldenRunRequest> requests,
                                        const GoldenSchedule& schedule, const GoldenRunOptions& options) {
    GoldenRun run;
    run.layers = model.layers();
    const int64_t hidden = model.hidden_size();
    if (!schedule.prompt_tokens.empty() && schedule.prompt_tokens.size() != requests.size())
        return invalid_argument_error("schedule {}: {} prompt lengths for {} requests", schedule.name,
                                      schedule.prompt_tokens.size(), requests.size());
    std::vector<int64_t> n_tokens;
    for (size_t i = 0; i < requests.size(); ++i) {
        const GoldenRunRequest& r = requests[i];
        if (r.inputs.size() != run.layers.size())
            return invalid_argument_error("request {}: inputs for {} layers, the model runs {}", i, r.inputs.size(),
                                          run.layers.size());
        for (size_t lp = 0; lp < r.inputs.size(); ++lp)
            if (r.inputs[lp].size() < static_cast<size_t>(r.n_tokens * hidden))
                return invalid_argument_error("request {}: {} input values for layer {}, expected {} tokens × {}", i,
                                              r.inputs[lp].size(), run.layers[lp], r.n_tokens, hidden);
        GoldenRequestRun out;
        out.n_tokens = r.n_tokens;
        out.outputs.assign(run.layers.size(), std::vector<float>(static_cast<size_t>(r.n_tokens * hidden), std::nanf("")));
        out.selections.resize(run.layers.size());
        run.requests.push_back(std::move(out));
        n_tokens.push_back(r.n_tokens);
    }

    Recorder recorder(run, options.rewrite);
    ObserverScope observing(model, options.observe ? &recorder : nullptr);
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(model, schedule.engine));
    std::vector<std::unique_ptr<RequestIo>> ios;
    for (size_t i = 0; i < requests.size(); ++i) {
        const int64_t prompt = schedule.prompt_tokens.empty() ? requests[i].n_tokens : schedule.prompt_tokens[i];
        ios.push_back(std::make_unique<RunIo>(requests[i], run.requests[i], hidden));
        SIEVE_RETURN_IF_ERROR(
            engine->add_request(static_cast<RequestId>(i), requests[i].n_tokens, prompt, ios.back().get()));
    }
    if (schedule.noise_request) {
        const int64_t longest = longest_request(n_tokens);
        ios.push_back(std::make_unique<NoiseIo>(hidden, schedule.noise_seed));
        SIEVE_RETURN_IF_ERROR(engine->add_request(static_cast<RequestId>(requests.size()), longest, longest / 2,
                                                  ios.back().get()));
    }
    SIEVE_RETURN_IF_ERROR(engine->run());
    for (size_t i = 0; i < requests.size(); ++i) {
        const RequestId id = static_cast<RequestId>(i);
        if (engine->status(id) != RequestStatus::finished)
            return engine->error(id).with_context(fmt::format("request {}", id));
    }
    return run;
}

Expected<std::vector<GoldenRunRequest>> golden_fixture_requests(const GoldenFixture& fixture,
                                                                std::span<const int64_t> layers) {
    std::vector<size_t> captured;  // the fixture's layer_pos of each of `layers`
    for (int64_t layer : layers) {
        auto it = std::find(fixture.layers.begin(), fixture.layers.end(), layer);
        if (it == fixture.layers.end())
            return not_found_error("the {} fixture has no capture of layer {}", fixture.family, layer);
        captured.push_back(static_cast<size_t>(it - fixture.layers.begin()));
    }
    std::vector<GoldenRunRequest> requests;
    for (const GoldenRequest& g : fixture.requests) {
        GoldenRunRequest r;
        r.n_tokens = g.n_tokens;
        for (size_t lp : captured) {
            const Tensor& input = g.layers[lp].input;
            r.inputs.emplace_back(input.as<float>(), static_cast<size_t>(input.numel()));
        }
        requests.push_back(std::move(r));
    }
    return requests;
}

}  // namespace sieve

#include "dsv4_test_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace sieve::dsv4_test {

namespace {

class FixtureIo final : public RequestIo {
public:
    FixtureIo(std::vector<Tensor> inputs, std::vector<std::vector<float>>& outputs, int64_t hidden)
        : inputs_(std::move(inputs)), outputs_(outputs), hidden_(hidden) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        const float* src = inputs_[static_cast<size_t>(layer_pos)].as<float>() + position * hidden_;
        std::copy(src, src + hidden_, row);
    }
    void output(int64_t layer_pos, int64_t position, const float* row) override {
        std::copy(row, row + hidden_, outputs_[static_cast<size_t>(layer_pos)].data() + position * hidden_);
    }

private:
    std::vector<Tensor> inputs_;
    std::vector<std::vector<float>>& outputs_;
    int64_t hidden_;
};

class Recorder final : public SelectionObserver {
public:
    Recorder(const Fixture& f, RunResult& r, const RunOptions& o) : f_(f), r_(r), o_(o) {}
    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t) override {
        std::set<int32_t> s;
        for (int32_t i : selected)
            if (i >= 0) s.insert(i);
        r_.selections[{request, layer}][position] = s;
        r_.scores[{request, layer}][position].assign(scores.begin(), scores.end());
        if (o_.reference_selection) substitute(layer, request, position, selected);
        if (o_.modify) o_.modify(layer, request, position, selected);
    }

private:
    void substitute(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected) {
        auto it = reference_.find({request, layer});
        if (it == reference_.end())
            it = reference_.emplace(std::make_pair(request, layer),
                                    golden_tensor(f_, fmt::format("req{}.layer{}.topk", request, layer), DType::i32))
                     .first;
        const Tensor& ref = it->second;
        const int32_t* row = ref.as<int32_t>() + position * ref.dim(1);
        size_t j = 0;
        for (int64_t i = 0; i < ref.dim(1) && j < selected.size(); ++i)
            if (row[i] >= 0) selected[j++] = row[i];
        std::sort(selected.begin(), selected.begin() + static_cast<std::ptrdiff_t>(j));
        for (; j < selected.size(); ++j) selected[j] = -1;
    }

    const Fixture& f_;
    RunResult& r_;
    const RunOptions& o_;
    std::map<std::pair<int64_t, int64_t>, Tensor> reference_;
};

}  // namespace

RunResult run_fixture(const Fixture& f, AttentionModel& model, const RunOptions& options) {
    RunResult result;
    const std::vector<int64_t> layers = model.layers();
    const int64_t hidden = model.hidden_size();
    std::vector<int64_t> ids = options.requests;
    if (ids.empty())
        for (int64_t r = 0; r < f.n_requests; ++r) ids.push_back(r);
    Recorder recorder(f, result, options);
    model.set_selection_observer(options.observe ? &recorder : nullptr);
    auto engine = Engine::create(model, options.engine);
    if (!engine.has_value()) {
        result.status = engine.status();
        return result;
    }
    std::vector<std::unique_ptr<FixtureIo>> ios;
    for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t r = ids[i];
        std::vector<Tensor> inputs;
        int64_t n_tokens = 0;
        for (int64_t layer : layers) {
            inputs.push_back(golden_tensor(f, fmt::format("req{}.layer{}.input", r, layer), DType::f32));
            n_tokens = inputs.back().dim(0);
        }
        if (options.truncate > 0) n_tokens = std::min(n_tokens, options.truncate);
        auto& outs = result.outputs[r];
        outs.assign(layers.size(), std::vector<float>(static_cast<size_t>(n_tokens * hidden), std::nanf("")));
        ios.push_back(std::make_unique<FixtureIo>(std::move(inputs), outs, hidden));
        const int64_t prompt = i < options.prompt_tokens.size() ? std::min(options.prompt_tokens[i], n_tokens) : n_tokens;
        const Status s = (*engine)->add_request(r, n_tokens, prompt, ios.back().get());
        if (!s.is_ok()) {
            result.status = s;
            return result;
        }
    }
    result.status = (*engine)->run();
    for (int64_t r : ids)
        if (result.status.is_ok() && (*engine)->status(r) != RequestStatus::finished)
            result.status = (*engine)->error(r).with_context(fmt::format("request {}", r));
    model.set_selection_observer(nullptr);
    return result;
}

double relative_error(const std::vector<float>& got, const Tensor& want, int64_t n_values) {
    double d2 = 0, r2 = 0;
    for (int64_t i = 0; i < n_values; ++i) {
        const double d = static_cast<double>(got[static_cast<size_t>(i)]) - want.as<float>()[i];
        d2 += d * d;
        r2 += static_cast<double>(want.as<float>()[i]) * want.as<float>()[i];
        if (!std::isfinite(got[static_cast<size_t>(i)])) return INFINITY;
    }
    return std::sqrt(d2 / std::max(r2, 1e-300));
}

}  // namespace sieve::dsv4_test

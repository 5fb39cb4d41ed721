#include "golden_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "sieve/backends/backend.h"
#include "golden_fixture.h"
#include "golden_selection.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/model_factory.h"
#include "sieve/models/registry.h"

namespace sieve {

namespace {

std::string tokens_with(int64_t n, const char* what) {
    return fmt::format("{} token{} with {}", n, n == 1 ? "" : "s", what);
}

Status validate(const CheckOptions& options) {
    if (!(options.max_tie_fraction >= 0.0 && options.max_tie_fraction <= 1.0))
        return invalid_argument_error("the largest tie fraction {} is not in [0, 1]", options.max_tie_fraction);
    return Status::ok();
}

// The fixture's layer_pos of model layer `layer`, or −1.
int64_t fixture_layer_pos(const GoldenFixture& fixture, int64_t layer) {
    auto it = std::find(fixture.layers.begin(), fixture.layers.end(), layer);
    return it == fixture.layers.end() ? -1 : static_cast<int64_t>(it - fixture.layers.begin());
}

template <typename Ref>
OutputDiff diff_of(std::span<const float> got, std::span<const Ref> ref) {
    OutputDiff d;
    double diff2 = 0, ref2 = 0;
    for (size_t k = 0; k < got.size() && k < ref.size(); ++k) {
        const double x = static_cast<double>(got[k]) - static_cast<double>(ref[k]);
        d.nonfinite += !std::isfinite(got[k]);
        d.max_abs = std::max(d.max_abs, std::fabs(x));
        diff2 += x * x;
        ref2 += static_cast<double>(ref[k]) * static_cast<double>(ref[k]);
    }
    if (d.nonfinite) return {d.nonfinite, INFINITY, INFINITY};
    d.rel = std::sqrt(diff2 / std::max(ref2, 1e-300));
    return d;
}

}  // namespace

OutputDiff output_diff(std::span<const float> got, std::span<const float> ref) { return diff_of(got, ref); }
OutputDiff output_diff(std::span<const float> got, std::span<const double> ref) { return diff_of(got, ref); }

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

Expected<GoldenRun> run_golden_fixture(AttentionModel& model, const GoldenFixture& fixture, const GoldenSchedule& schedule,
                                       const CheckOptions& options) {
    SIEVE_ASSIGN_OR_RETURN(const std::vector<GoldenRunRequest> requests,
                           golden_fixture_requests(fixture, model.layers()));
    GoldenRunOptions run_options;
    const bool substitute_ties = options.profile == NumericsProfile::exact;
    run_options.rewrite = [&](int64_t request, int64_t layer, int64_t position, std::span<int32_t> selected,
                              std::span<const float> scores, int64_t tokens_per_score) {
        const int64_t lp = fixture_layer_pos(fixture, layer);
        if (lp < 0) return;
        const GoldenLayer& golden = fixture.requests[static_cast<size_t>(request)].layers[static_cast<size_t>(lp)];
        if (!golden.has_topk) return;
        const std::vector<int32_t>& ref = golden.topk.sets[static_cast<size_t>(position)];
        if (!options.reference_selection &&
            !(substitute_ties && judge_selection(selected, ref, scores, tokens_per_score) == SelectionVerdict::tie))
            return;
        if (ref.size() > selected.size()) return;
        std::copy(ref.begin(), ref.end(), selected.begin());
        std::fill(selected.begin() + static_cast<std::ptrdiff_t>(ref.size()), selected.end(), -1);
    };
    return run_golden_requests(model, requests, schedule, run_options);
}

Expected<CheckReport> judge_golden_run(const GoldenFixture& fixture, const GoldenRun& run, const std::string& schedule,
                                       const CheckOptions& options) {
    SIEVE_RETURN_IF_ERROR(validate(options));
    if (run.requests.size() != fixture.requests.size())
        return invalid_argument_error("a run of {} requests, the fixture has {}", run.requests.size(),
                                      fixture.requests.size());
    CheckReport report;
    report.model_type = fixture.family;
    report.schedule = schedule;
    report.max_tie_fraction = options.max_tie_fraction;
    report.passed = true;
    for (size_t r = 0; r < run.requests.size(); ++r) {
        const GoldenRequest& request = fixture.requests[r];
        for (size_t lp = 0; lp < run.layers.size(); ++lp) {
            const int64_t golden_lp = fixture_layer_pos(fixture, run.layers[lp]);
            if (golden_lp < 0)
                return not_found_error("the {} fixture has no capture of layer {}", fixture.family, run.layers[lp]);
            const GoldenLayer& golden = request.layers[static_cast<size_t>(golden_lp)];
            const std::vector<float>& got = run.requests[r].outputs[lp];
            if (got.size() != static_cast<size_t>(golden.output.numel()))
                return invalid_argument_error("request {} layer {}: {} output values, the fixture has {}", r,
                                              run.layers[lp], got.size(), golden.output.numel());
            LayerCheck check;
            check.request = static_cast<int64_t>(r);
            check.layer = run.layers[lp];
            check.tokens = request.n_tokens;
            // ‖ref‖₂ > 0: read_golden_fixture refuses an all-zero reference output.
            const OutputDiff d = output_diff(got, std::span<const float>(golden.output.as<float>(), got.size()));
            check.nonfinite_outputs = d.nonfinite;
            check.max_abs_diff = d.max_abs;
            check.rel_error = d.rel;
            if (golden.has_topk) {
                for (const auto& [position, s] : run.requests[r].selections[lp]) {
                    check.topk_tokens += s.reports;
                    const std::vector<int32_t>& ref = golden.topk.sets[static_cast<size_t>(position)];
                    switch (judge_selection(s.selected, ref, s.scores, s.tokens_per_score)) {
                        case SelectionVerdict::equal: ++check.topk_equal; break;
                        case SelectionVerdict::differs: break;
                        case SelectionVerdict::nonfinite_scores: ++check.nonfinite_score_tokens; break;
                        case SelectionVerdict::constant_scores: ++check.constant_score_tokens; break;
                        case SelectionVerdict::tie:
                            ++check.tie_tokens;
                            ++check.topk_equal;
                            break;
                    }
                }
                check.reference_none_entries = golden.topk.none_entries;
            }
            judge_layer(check, golden.has_topk, options);
            report.passed &= check.passed;
            report.layers.push_back(std::move(check));
        }
    }
    return report;
}

Expected<CheckReport> check_golden_fixture(AttentionModel& model, const GoldenFixture& fixture,
                                           const GoldenSchedule& schedule, const CheckOptions& options) {
    SIEVE_RETURN_IF_ERROR(validate(options));
    SIEVE_ASSIGN_OR_RETURN(const GoldenRun run, run_golden_fixture(model, fixture, schedule, options));
    SIEVE_ASSIGN_OR_RETURN(CheckReport report, judge_golden_run(fixture, run, schedule.name, options));
    report.backend = model.backend().name();
    return report;
}

Expected<CheckReport> run_golden_check(const std::filesystem::path& fixture_dir, const CheckOptions& options) {
    SIEVE_RETURN_IF_ERROR(validate(options));
    const auto ckpt_dir = fixture_dir / "ckpt";
    SIEVE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(ckpt_dir));
    SIEVE_ASSIGN_OR_RETURN(auto backend, make_backend(options.backend));
    ModelOptions model_options;
    model_options.profile = options.profile;
    model_options.backend = backend.get();
    // Every layer sieve runs, the MTP layers the config announces included: the fixture must capture
    // exactly these (golden_format.md).
    SIEVE_ASSIGN_OR_RETURN(const AttentionLayout layout, attention_layout(config, options.profile));
    model_options.layers = layers_sieve_runs(layout);
    SIEVE_ASSIGN_OR_RETURN(auto model, load_attention_model(config, *checkpoint, model_options));
    SIEVE_ASSIGN_OR_RETURN(const GoldenFixture fixture, read_golden_fixture(fixture_dir / "golden.safetensors", config,
                                                                            model->layers(), model->hidden_size()));
    std::vector<int64_t> n_tokens;
    for (const GoldenRequest& r : fixture.requests) n_tokens.push_back(r.n_tokens);
    SIEVE_ASSIGN_OR_RETURN(const GoldenSchedule schedule, golden_schedule(options.schedule, n_tokens, options.seed));
    return check_golden_fixture(*model, fixture, schedule, options);
}

}  // namespace sieve

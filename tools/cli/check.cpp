#include "check.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "sieve/io/config.h"

namespace sieve::cli {

Expected<bool> run_check(const CheckCommandOptions& command, std::ostream& out) {
    CheckCommandOptions options = command;
    if (!options.tolerance_given || !options.agreement_given) {
        SIEVE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(options.fixture / "ckpt"));
        const CheckTolerances d = default_check_tolerances(options.check.profile, config.model_type);
        if (!options.tolerance_given) options.check.rel_tolerance = d.rel;
        if (!options.agreement_given) options.check.min_topk_agreement = d.min_topk_agreement;
    }
    SIEVE_ASSIGN_OR_RETURN(CheckReport report, run_golden_check(options.fixture, options.check));
    int failed = 0;
    int64_t reference_none = 0;
    for (const LayerCheck& c : report.layers) {
        failed += !c.passed;
        reference_none += c.reference_none_entries;
    }
    if (options.json) {
        nlohmann::json j{{"fixture", options.fixture.string()},
                         {"model_type", report.model_type},
                         {"schedule", report.schedule},
                         {"backend", report.backend},
                         {"profile", numerics_profile_name(options.check.profile)},
                         {"rel_tolerance", options.check.rel_tolerance},
                         {"min_topk_agreement", options.check.min_topk_agreement},
                         {"max_tie_fraction", report.max_tie_fraction},
                         {"passed", report.passed}};
        for (const LayerCheck& c : report.layers)
            j["layers"].push_back({{"request", c.request},
                                   {"layer", c.layer},
                                   {"tokens", c.tokens},
                                   {"nonfinite_outputs", c.nonfinite_outputs},
                                   {"max_abs_diff", c.max_abs_diff},
                                   {"rel_error", c.rel_error},
                                   {"topk_tokens", c.topk_tokens},
                                   {"topk_equal", c.topk_equal},
                                   {"tie_tokens", c.tie_tokens},
                                   {"nonfinite_score_tokens", c.nonfinite_score_tokens},
                                   {"constant_score_tokens", c.constant_score_tokens},
                                   {"reference_none_entries", c.reference_none_entries},
                                   {"passed", c.passed},
                                   {"reason", c.reason}});
        out << j.dump(2) << "\n";
    } else {
        fmt::print(out, "{} ({}) on {}, schedule {}, profile {}, tolerance {:.2g}, top-k agreement ≥ {:.2f}, ties ≤ {:g}%\n",
                   options.fixture.string(), report.model_type, report.backend, report.schedule,
                   numerics_profile_name(options.check.profile), options.check.rel_tolerance,
                   options.check.min_topk_agreement, 100 * report.max_tie_fraction);
        fmt::print(out, "{:>7} {:>5} {:>6} {:>12} {:>12} {:>14} {:>5}  {}\n", "request", "layer", "tokens", "max |Δ|",
                   "rel error", "top-k equal", "ties", "result");
        for (const LayerCheck& c : report.layers) {
            const std::string topk = c.topk_tokens ? fmt::format("{}/{}", c.topk_equal, c.topk_tokens) : "-";
            fmt::print(out, "{:>7} {:>5} {:>6} {:>12.3e} {:>12.3e} {:>14} {:>5}  {}\n", c.request, c.layer, c.tokens,
                       c.max_abs_diff, c.rel_error, topk, c.topk_tokens ? std::to_string(c.tie_tokens) : "-",
                       c.passed ? "ok" : "FAIL: " + c.reason);
        }
        // golden_format.md .topk: "-1 or out-of-causal-range entries mean none".
        if (reference_none > 0)
            fmt::print(out, "reference top-k: {} entries past their token's causal range read as none\n",
                       reference_none);
        fmt::print(out, "{}\n", report.passed ? "all layers within tolerance"
                                              : fmt::format("{} layer check(s) out of tolerance", failed));
    }
    return report.passed;
}

}  // namespace sieve::cli

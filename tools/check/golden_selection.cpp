#include "golden_selection.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

namespace sieve {

SelectionVerdict judge_selection(std::span<const int32_t> selected, std::span<const int32_t> reference,
                                 std::span<const float> scores, int64_t tokens_per_score) {
    const int64_t per = std::max<int64_t>(1, tokens_per_score);
    std::set<int32_t> mine;
    for (int32_t i : selected)
        if (i >= 0) mine.insert(i);
    const std::set<int32_t> ref(reference.begin(), reference.end());
    auto score_index = [&](int32_t i) -> std::optional<size_t> {
        const int64_t s = i / per;
        if (s < 0 || s >= static_cast<int64_t>(scores.size())) return std::nullopt;
        return static_cast<size_t>(s);
    };

    if (!scores.empty()) {
        float max_abs = 0, lowest = INFINITY, highest = -INFINITY;
        for (float s : scores) {
            if (!std::isfinite(s)) return SelectionVerdict::nonfinite_scores;
            max_abs = std::max(max_abs, std::fabs(s));
            lowest = std::min(lowest, s);
            highest = std::max(highest, s);
        }
        std::set<size_t> chosen;  // scored candidates the token kept
        for (int32_t i : mine)
            if (auto s = score_index(i)) chosen.insert(*s);
        const bool selected_among_them = chosen.size() < scores.size();
        if (selected_among_them && highest - lowest <= static_cast<float>(kTieRelativeSlack) * max_abs)
            return SelectionVerdict::constant_scores;
    }
    if (mine == ref) return SelectionVerdict::equal;
    if (scores.empty() || mine.size() != ref.size()) return SelectionVerdict::differs;

    // The sets differ only by candidates whose score is within the slack of sieve's own k-th
    // (lowest selected) score.
    float max_abs = 0, kth = INFINITY;
    for (float s : scores) max_abs = std::max(max_abs, std::fabs(s));
    for (int32_t i : mine)
        if (auto s = score_index(i)) kth = std::min(kth, scores[*s]);
    if (!std::isfinite(kth)) return SelectionVerdict::differs;
    const float slack = static_cast<float>(kTieRelativeSlack) * max_abs;
    auto near_kth = [&](int32_t i) {
        auto s = score_index(i);
        return s && std::fabs(scores[*s] - kth) <= slack;
    };
    for (int32_t i : mine)
        if (!ref.count(i) && !near_kth(i)) return SelectionVerdict::differs;
    for (int32_t i : ref)
        if (!mine.count(i) && !near_kth(i)) return SelectionVerdict::differs;
    return SelectionVerdict::tie;
}

}  // namespace sieve

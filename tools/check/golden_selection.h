// Judging one token's sparse selection against the reference's (specs/golden_format.md "Exact score
// ties"), from the scores sieve's own indexer gave the token's candidates.
#pragma once

#include <cstdint>
#include <span>

namespace sieve {

// Two scores of a row are tied when they differ by at most this fraction of the row's largest
// |score| (golden_format.md "Exact score ties": "within 1e-5 × (largest |score| of the row)").
inline constexpr double kTieRelativeSlack = 1e-5;

enum class SelectionVerdict {
    equal,             // the same set as the reference's
    tie,               // differs only by candidates tied with sieve's own k-th score
    differs,           // any other difference
    nonfinite_scores,  // a scored candidate has a NaN or infinite score: the indexer is broken
    constant_scores,   // the token selected among candidates that all score the same: the
                       // selection says nothing about the indexer (a dead one scores every
                       // candidate 0 and would otherwise be one big tie)
};

// selected: [width] sieve's choice (valid entries ≥ 0, the rest -1); reference: the reference's set,
// ascending, in the same index space (golden_format.md .topk, read by read_golden_fixture).
// scores: [n_scored] sieve's score of each scored candidate, empty when the token took every
// candidate without scoring; index i has score scores[i / tokens_per_score] when that lies in
// range (QSA scores whole groups and leaves the open tail unscored; SelectionObserver).
//
// A row's scores are judged before its set: non-finite scores and constant scores (every scored
// candidate within the tie slack of the others, while the token left some of them out) are
// failures even when the set happens to equal the reference's, and never ties. A tie exchanges
// candidates one for one, so the two sets also have the same size.
SelectionVerdict judge_selection(std::span<const int32_t> selected, std::span<const int32_t> reference,
                                 std::span<const float> scores, int64_t tokens_per_score);

}  // namespace sieve

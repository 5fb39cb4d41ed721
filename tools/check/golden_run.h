// Runs requests through the runtime the way a golden check needs them run (specs/golden_format.md):
// teacher-forced (every layer reads its input from the request, never the layer below's output),
// under a schedule, recording each layer's output and each token's selection with its scores.
// `sieve check` (golden_check.h) runs fixtures with it; the model tests of every family run their
// fixtures and random inputs with it too, with their own schedules, backends and selection rewrites,
// so that what they assert is what the check runs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "sieve/core/status.h"
#include "golden_fixture.h"
#include "sieve/models/attention_model.h"
#include "sieve/runtime/engine.h"

namespace sieve {

// One request: its tokens' inputs, per layer of the model.
struct GoldenRunRequest {
    int64_t n_tokens = 0;
    // [layer_pos] [≥ n_tokens · hidden]: row t is token t's input to the layer at layer_pos of the
    // model's layers(). The data must outlive the run.
    std::vector<std::span<const float>> inputs;
};

// How the engine steps the requests.
struct GoldenSchedule {
    std::string name;  // what reports call it
    EngineOptions engine;
    std::vector<int64_t> prompt_tokens;  // per request (the rest decode); empty: every token is prompt
    // A request of random inputs with a NaN every few tokens, mixed into the steps, whose outputs
    // nobody reads: it shows that one request's inputs never change another request's outputs.
    bool noise_request = false;
    uint64_t noise_seed = 1;
};

// The schedules of `sieve check` for requests of `n_tokens` tokens each. one-shot: each request in
// one prefill step, alone. chunk:N: prefill chunks of at most N tokens, one request at a time.
// decode: every token its own step (the requests' decodes batched together). mixed: all requests
// at once with random prompt/decode splits and random chunk sizes (from `seed`) under a small token
// budget, plus the noise request.
Expected<GoldenSchedule> golden_schedule(const std::string& name, std::span<const int64_t> n_tokens, uint64_t seed);

// A token's selection as its layer made it, before any rewrite (SelectionObserver).
struct SelectionRecord {
    std::vector<int32_t> selected;  // [width] valid entries ascending, then −1
    std::vector<float> scores;      // [n_scored] the scored candidates' scores; empty when unscored
    int64_t tokens_per_score = 1;
    int64_t reports = 0;  // how often the observer saw the token (the contract: once)
    std::set<int32_t> set() const;  // the valid entries of `selected`
    bool operator==(const SelectionRecord&) const = default;
};

struct GoldenRequestRun {
    int64_t n_tokens = 0;
    std::vector<std::vector<float>> outputs;  // [layer_pos] [n_tokens · hidden]; NaN where no output came
    // [layer_pos] position → record, for the tokens whose selection the observer saw (none for a
    // layer that selects nothing, none when the run did not observe).
    std::vector<std::map<int64_t, SelectionRecord>> selections;
    bool operator==(const GoldenRequestRun&) const = default;
};

struct GoldenRun {
    std::vector<int64_t> layers;             // the model's layers(): what layer_pos indexes
    std::vector<GoldenRequestRun> requests;  // in the order the requests were given
};

// Called for each token's selection after it was recorded and before attention uses it; may
// rewrite `selected` (keeping its width). `request` is the index into the run's requests.
using SelectionRewrite = std::function<void(int64_t request, int64_t layer, int64_t position, std::span<int32_t> selected,
                                            std::span<const float> scores, int64_t tokens_per_score)>;

struct GoldenRunOptions {
    SelectionRewrite rewrite;
    // false: no observer at all (nothing is recorded), so the indexers take their fused selection
    // (ops/indexer_scores.h "Fused selection") instead of writing score rows for an observer.
    bool observe = true;
};

// Runs `requests` (request i as RequestId i; the noise request, if any, after them) until every one
// finished; an error when one did not (with the request's index), or when a request does not give
// one input per layer of at least n_tokens rows.
Expected<GoldenRun> run_golden_requests(AttentionModel& model, std::span<const GoldenRunRequest> requests,
                                        const GoldenSchedule& schedule, const GoldenRunOptions& options = {});

// The fixture's requests for a model that runs `layers`: each layer's captured inputs. An error when
// the fixture has no capture of one of the layers.
Expected<std::vector<GoldenRunRequest>> golden_fixture_requests(const GoldenFixture& fixture,
                                                                std::span<const int64_t> layers);

}  // namespace sieve

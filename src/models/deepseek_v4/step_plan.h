// The plan of one DeepSeek-V4 step (DESIGN.md "a step is planned once"; deepseek_v4.md §5 "Batch
// metadata"): the metadata that depends only on the batch — positions, token → request, and per cache group
// its slot lists or packed block tables — built on the host by plan_step and uploaded once; every layer's
// forward then reads the device copies. Layers of one cache group share its lists (they share its block
// tables, kv/paged_cache.h). An entry the plan needs that is not resident is an internal error naming the
// cache, the request and the entry (step_slots.h); entries chosen on the device (the CSA top-k) are checked
// by the op that reads them (ops/selected_slots.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/kv/step_batch.h"
#include "models/step_uploads.h"
#include "sieve/ops/block_tables.h"

namespace sieve::dsv4 {

// What the layers of a model read from a step's plan, by cache group: gathered once at load from the
// layers (AttentionLayer::add_plan_needs); each group appears once.
struct StepPlanNeeds {
    struct Compressor {       // a compressor's state rows and the entries it completes (§3.4)
        std::string state;    // its state group (per-token rows)
        std::string dest;     // the group its entries go to (compressed rows or indexer keys)
        int64_t ratio = 0;    // m
        bool overlap = false; // coff = 2: an entry pools its own and the previous block (§3.4)
    };
    struct Compressed {       // compressed rows attention reads through selected_slots (§3.5, §3.7)
        std::string group;
        int64_t ratio = 0;
    };
    struct Indexer {          // a Lightning Indexer's key lists (§3.6)
        std::string keys;     // its indexer-key group
        int64_t ratio = 0;
        int64_t top_k = 0;    // index_topk
    };

    std::string window;          // the sliding-window group, read by every layer (§3.2)
    int64_t sliding_window = 0;
    std::vector<Compressor> compressors;
    std::vector<Compressed> compressed;
    std::vector<Indexer> indexers;

    // Add a need unless its group is already there.
    void add(Compressor c);
    void add(Compressed c);
    void add(Indexer i);
};

// Device lists of the window group.
struct PlannedWindow {
    const int32_t* token_slots = nullptr;  // [N] each token's own row (§5 step 3)
    const int32_t* slots = nullptr;        // [N, width] its window, oldest first, −1 before position 0 (§3.2)
    int64_t width = 0;                     // min(sliding_window, the most positions a token sees)
};

// Device lists of one compressor (step_slots.h emission_slots).
struct PlannedCompressor {
    std::string state;
    const int32_t* state_slots = nullptr;      // [N] each token's state row
    int64_t n_emit = 0;                        // entries the step completes
    const int32_t* gather = nullptr;           // [n_emit, coff·m] state rows each entry pools
    const int32_t* entry_slots = nullptr;      // [n_emit] where each entry goes in the destination group
    const int64_t* entry_positions = nullptr;  // [n_emit] k·m, its RoPE position
};

// A compressed group's block tables, for the selected_slots op (ops/selected_slots.h).
struct PlannedCompressed {
    std::string group;
    BlockTables tables;        // device: the step's packed tables and the token → request rows
    int64_t ratio = 0;
    int64_t block_size = 0;    // entries per block
    int64_t n_slots = 0;       // the group's slots (every slot it yields is below)
    int64_t visible = 0;       // the most entries a token of the step sees: max_t ⌊(p_t + 1)/m⌋
};

// An indexer's lists (§3.6). Scored when some request has more than top_k entries; else the short-context
// fallback takes every causal entry unscored (vLLM `_fill_short_context_topk`).
struct PlannedIndexer {
    std::string keys;
    bool scored = false;
    int64_t width = 0;                       // W = min(top_k, visible): selection rows hold W entries
    std::vector<int32_t> candidates;         // [N] host: ⌊(p_t + 1)/m⌋, the causal candidates of each token
    // Scored steps only:
    const int32_t* n_keys = nullptr;         // [N] device copy of `candidates`
    BlockTables tables;                      // device: the key group's packed tables and the token → request rows
    int64_t n_slots = 0;                     // the key group's slots
    int64_t max_keys = 0;                    // the most entries a request holds after the step
};

class StepPlan {
public:
    // Plans `batch` for `needs` on `backend`; the previous step's device lists become invalid.
    Status build(Backend& backend, const StepBatch& batch, const StepPlanNeeds& needs);
    // Whether `batch` is the step the plan was built for: the same (request, start, tokens) in order.
    bool planned(const StepBatch& batch) const;

    int64_t n_tokens() const { return n_tokens_; }
    const int64_t* positions() const { return positions_; }          // [N] device
    const int32_t* token_request() const { return token_request_; }  // [N] device: row in the block tables
    const PlannedWindow& window() const { return window_; }
    // The group's lists; internal_error if no layer declared it.
    Expected<const PlannedCompressor*> compressor(std::string_view state_group) const;
    Expected<const PlannedCompressed*> compressed(std::string_view group) const;
    Expected<const PlannedIndexer*> indexer(std::string_view keys_group) const;

    // Bytes held: device uploads and host staging (`sieve run`'s memory report).
    int64_t bytes() const;

private:
    template <typename T>
    Expected<const T*> upload(Backend& backend, const std::vector<T>& values, std::string_view what) {
        return uploads_.put(backend, std::span<const T>(values), what);
    }
    // The device tables of `group` for the step, after checking that every entry its tokens may read
    // (entries below ⌊end/ratio⌋ of each request) is resident.
    Expected<BlockTables> resident_tables(Backend& backend, const StepBatch& batch, const CacheGroup& group,
                                          int64_t ratio, std::string_view what);

    std::vector<int64_t> signature_;  // StepBatch::signature() of the planned step
    bool built_ = false;
    int64_t n_tokens_ = 0;
    const int64_t* positions_ = nullptr;
    const int32_t* token_request_ = nullptr;
    PlannedWindow window_;
    std::vector<PlannedCompressor> compressors_;
    std::vector<PlannedCompressed> compressed_;
    std::vector<PlannedIndexer> indexers_;
    StepUploads uploads_;
    // Host lists on their way to the device (an upload copies them at once), reused by every list.
    std::vector<int32_t> staging_, entry_staging_;
    std::vector<int64_t> position_staging_;
};

}  // namespace sieve::dsv4

// One step of the engine: which tokens of which requests run together, and where their cache
// entries live (specs/deepseek_v4.md §5: positions, query_start_loc, seq_lens, token → request,
// slot mappings and block tables per cache group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sieve/core/status.h"

#include "sieve/kv/paged_cache.h"

namespace sieve {

// A request's share of a step: tokens at positions [start, start + n_tokens).
struct StepRequest {
    RequestId id = 0;
    int64_t start = 0;     // tokens the request had already run (its context before the step)
    int64_t n_tokens = 0;  // tokens it runs in this step
    bool is_decode = false;
    // A later draft step (LayerStepper::reuse_selections, one token): the layers that select with an indexer
    // attend with the selections they made for the request's last token of its last step that did not reuse
    // (draft step 0) instead of selecting anew, and still update their side caches (skip_topk, qsa.md §7).
    bool reuse_selection = false;
    int64_t end() const { return start + n_tokens; }  // seq_len after the step
};

// The caches of the model, by group; a layer finds its own storage with its layer slot.
struct StepCaches {
    std::vector<CacheGroup*> groups;
    CacheGroup* find(std::string_view name) const {
        for (CacheGroup* g : groups)
            if (g->name() == name) return g;
        return nullptr;
    }
};

struct StepBatch {
    std::vector<StepRequest> requests;     // decodes first, then prefill chunks
    std::vector<int64_t> query_start_loc;  // [n_requests + 1]: first token of each request
    std::vector<int64_t> positions;        // [n_tokens]: absolute position of each token
    std::vector<int32_t> token_request;    // [n_tokens]: index into `requests`
    StepCaches caches;

    int64_t n_tokens() const { return static_cast<int64_t>(positions.size()); }
    int64_t n_requests() const { return static_cast<int64_t>(requests.size()); }
    RequestId request_of_token(int64_t t) const { return requests[static_cast<size_t>(token_request[static_cast<size_t>(t)])].id; }
    // The most complete blocks of `ratio` positions a token of the step sees: max_t ⌊(p_t + 1)/ratio⌋
    // (ratio 1: the most positions; DeepSeek-V4's compressed entries: ratio m, deepseek_v4.md §3.5). Rows
    // and lists sized by it are as wide as the step can fill.
    int64_t max_visible_entries(int64_t ratio) const;
    // The step's identity for what a model plans from it (AttentionModel::plan_step): (id, start,
    // n_tokens) of every request, in order. Two steps of a request never share a start.
    std::vector<int64_t> signature() const;
};

// Builds positions, query_start_loc and token_request from the requests (in the given order).
StepBatch make_step_batch(std::vector<StepRequest> requests, StepCaches caches);

// The step's block tables of one cache group, packed as the ops read them (ops/block_tables.h): row q
// of `table` [n_requests, stride] is the table of batch.requests[q], −1 past its end. Returns the
// stride: the longest table of the step, at least 1.
int64_t pack_block_tables(const StepBatch& batch, const CacheGroup& group, std::vector<int32_t>& table);

// The slots of entries [begin, end) of `request` in `group` into out[0, end − begin) (nullptr: only
// checked), block by block through its table (ops/block_tables.h paged_slot): one table lookup per block,
// not one per entry. The first entry that is not resident is an internal error naming the cache, the
// request and the entry; a slot past int32 (the ops' slot lists) is unsupported.
Status resident_entry_slots(const CacheGroup& group, RequestId request, int64_t begin, int64_t end, int32_t* out);

// out[t] = the slot of token t's own position in `group` (where its cache row is written). out: [n_tokens]
Status token_slots(const StepBatch& batch, const CacheGroup& group, int32_t* out);

}  // namespace sieve

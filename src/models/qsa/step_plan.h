// The QSA step plan (qsa.md §6 "Batch metadata", §5): what every QSA layer of a step reads besides its
// own activations and caches: per-token lengths and group counts, the packed block tables of the three
// cache groups, the slots the step writes and the ring members of the groups it completes. It depends on
// the batch alone (all layers share the cache groups' tables; each layer keeps its own storage in them),
// so QsaModel::plan_step builds it on the host and uploads it once per step.
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/io/config_qsa.h"
#include "sieve/kv/step_batch.h"
#include "models/step_uploads.h"
#include "sieve/ops/block_tables.h"

namespace sieve::qsa {

// Names of the three cache groups (as models/qsa/layout.cpp names the caches).
inline constexpr const char* kKvCache = "kv";
inline constexpr const char* kCompressedCache = "compressed_keys";
inline constexpr const char* kRingCache = "raw_key_ring";

struct StepPlan {
    std::vector<int64_t> signature;  // StepBatch::signature() of the planned step
    CacheGroup* kv = nullptr;
    CacheGroup* compressed = nullptr;
    CacheGroup* ring = nullptr;

    // Host side: what sizes the layer's buffers and chunks its selection; the observer's row lengths.
    std::vector<int64_t> seq_lens;    // [T] L of each token's request (tokens after the step)
    std::vector<int32_t> n_groups;    // [T] groups a token scores: the visible ones, or 0 when it takes them all
    std::vector<int64_t> completing;  // tokens whose position closes a group (§4.3), in token order
    int64_t max_cols = 0;             // max n_groups: the score rows' width
    int64_t k_top = 1;                // min(block_topk, the most groups a token sees), ≥ 1
    int64_t width = 0;                // k_top·r + r − 1: the token positions a row attends (§4.6)

    // Device copies (valid until the next plan).
    const int64_t* positions = nullptr;         // [T]
    const int64_t* seq_lens_d = nullptr;        // [T]
    const int32_t* n_groups_d = nullptr;        // [T]
    BlockTables kv_tables, compressed_tables;   // token_request: [T] rows of the step's requests
    const int32_t* kv_slots = nullptr;          // [T] each token's entry in "kv"
    const int32_t* ring_slots = nullptr;        // [T] each token's entry in the raw-key ring
    const int64_t* member_slots = nullptr;      // [completing, r] ring slots of each completed group's members
    const int64_t* pool_positions = nullptr;    // [completing] each completed group's first position g·r (§4.3)
    const int32_t* compressed_slots = nullptr;  // [completing] the compressed-key entry g of each completed group

    int64_t n_new() const { return static_cast<int64_t>(completing.size()); }
    // Bytes held (`sieve run`'s memory report).
    int64_t bytes() const;

    // Kept to reuse their memory.
    StepUploads uploads;
    std::vector<int32_t> kv_table_rows, compressed_table_rows, kv_slot_list, ring_slot_list, compressed_slot_list;
    std::vector<int64_t> member_slot_list, pool_position_list;
};

// Plans `batch` for the QSA layers of `config` on `backend` (a step whose tokens need an entry the
// runtime did not keep resident is an internal error naming the cache, request and position).
Status build_step_plan(const QsaConfig& config, Backend& backend, const StepBatch& batch, StepPlan& plan);

}  // namespace sieve::qsa

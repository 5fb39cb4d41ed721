// ops/compressor.h — DeepSeek-V4's KV compressor: per-token state rows and the softmax-gated
// channel-wise pooling of one compressed entry from them (deepseek_v4.md §3.4, §4.4; exact profile
// §3.4 "exact profile, complete" and §3.10).
//
// A compressor of ratio m and output width c has coff = 2 when it overlaps (CSA, m = 4) and 1
// otherwise (HCA); width = coff·c. For every source token s at position p_s it produces
//   a_s = W_kv · x_s  and  b_s = W_gate · x_s          ([width] each, the model's linears)
// and keeps the state row (§4.4, vLLM `save_partial_states`), in a paged fp32 cache:
//   row(s) = [ a_s[0 … width) | b_s[0 … width) + ape[p_s mod m, 0 … width) ]          (2·width fp32)
//
// compressor_state_store: row(s) for every token whose slot ≥ 0 (fp32 adds; ape row = the token's
// slot in its own block, also when the next entry uses its Ca half: §3.4).
//
// compressor_pool: entry k pools the rows of its window, given as gather_slots[k, 0 … coff·m) in
// position order (oldest first), −1 = no such token (positions < 0):
//   overlap (coff = 2): rows j < m are the previous block (tokens (k−1)·m … k·m − 1) and contribute their
//                       "Ca" half, columns [0, c); rows j ≥ m are the entry's own block (k·m … k·m + m − 1)
//                       and contribute their "Cb" half, columns [c, 2c)  (§3.4 [ref] overlap_transform).
//   no overlap:         the m rows of block k, columns [0, c).
// For every output channel e ∈ [0, c), with col_j(e) the column row j contributes:
//   A_j = row_j[col_j(e)],  B_j = row_j[width + col_j(e)]           (over the valid rows j)
//   out[k, e] = Σ_j softmax_j(B)·A_j = Σ_j e^(B_j − max B)·A_j / Σ_j e^(B_j − max B)
// fp32 (ref: double), accumulation order unspecified. No valid row gives 0. RMSNorm, RoPE at position
// k·m and the store of the entry are separate ops (rms_norm, rope, cache_store).
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

struct CompressorStateStoreParams {
    const float* kv = nullptr;         // [n_tokens, width] a_s, row t at kv + t·kv_row_stride
    const float* gate = nullptr;       // [n_tokens, width] b_s without ape, row t at gate + t·gate_row_stride
    const float* ape = nullptr;        // [ratio, width] row-major: the checkpoint's compressor.ape
    const int64_t* positions = nullptr;  // [n_tokens] absolute positions (≥ 0)
    const int32_t* slots = nullptr;    // [n_tokens] global slots in `state`, −1 = skip
    CacheView state;                   // entry_bytes = 8·width (2·width fp32)
    int64_t n_tokens = 0, width = 0, ratio = 0;
    int64_t kv_row_stride = 0, gate_row_stride = 0;  // elements, ≥ 0
};
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const CompressorStateStoreParams& p);
// positions[t] ≥ 0 and slots[t] ≥ −1 (reads both arrays).
Status check_indices(const CompressorStateStoreParams& p);

struct CompressorPoolParams {
    CacheView state;                      // entry_bytes = 8·coff·head_dim
    const int32_t* gather_slots = nullptr;  // [n_entries, coff·ratio], row k at gather_slots + k·gather_stride; −1 = absent
    float* out = nullptr;                 // [n_entries, head_dim] pooled ĉ_k, row k at out + k·out_row_stride
    int64_t n_entries = 0;
    int64_t head_dim = 0;                 // c: output width (head_dim main, index_head_dim indexer)
    int64_t ratio = 0;                    // m
    bool overlap = false;                 // coff = 2 (CSA)
    int64_t gather_stride = 0;            // elements, ≥ coff·ratio when n_entries > 1
    int64_t out_row_stride = 0;           // elements, ≥ head_dim when n_entries > 1

    int64_t coff() const { return overlap ? 2 : 1; }
    int64_t width() const { return coff() * head_dim; }
    int64_t n_rows() const { return coff() * ratio; }
};
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const CompressorPoolParams& p);
// Every gather_slots entry ≥ −1 (reads the n_entries rows).
Status check_indices(const CompressorPoolParams& p);

// The state row of a slot: [2·width] fp32 (plain rows inside each block).
inline float* compressor_state_row(const CacheView& v, int64_t slot) { return reinterpret_cast<float*>(v.row(slot)); }

}  // namespace sieve

// ops/selected_slots.h — a sparse selection's request-local entries → the global cache slots that
// sparse attention reads, through the step's block tables (ops/block_tables.h): the top-k → slots
// step of DeepSeek-V4 CSA and HCA (deepseek_v4.md §3.5–§3.7) and DSA (dsa_mla.md §4.3), as an op so
// that no host code reads a selection between the indexer and attention.
//
// Semantics. For token t of request row q = tables.token_request[t], with r = ratio:
//   visible   = (positions[t] + 1) / r                      entries the token may read (causal: a
//                                                           compressed entry once its m tokens exist)
//   every     = selected == nullptr, or n_scored != nullptr and n_scored[t] == 0
//   e_j       = j                        when every          every visible entry, oldest first (HCA; the
//                                                           short-context fallback: sparse = dense)
//             = selected[t, j]           otherwise           the selection's entries, −1 = none
//   slots[t, j] = paged_slot(tables.block_table + q · stride, e_j, block_size)   when 0 ≤ e_j < visible
//             = −1                                           otherwise (−1, a non-causal entry), j < width
// An entry outside the causal range means none (golden_format.md: reference top-k rows of early
// tokens list such entries).
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/ops/block_tables.h"

namespace sieve {

struct SelectedSlotsParams {
    const int32_t* selected = nullptr;   // [n_tokens, width] entries, row t at selected + t·selected_row_stride; or nullptr
    const int32_t* n_scored = nullptr;   // [n_tokens] or nullptr: rows with n_scored[t] == 0 take every visible entry
    const int64_t* positions = nullptr;  // [n_tokens] absolute positions
    BlockTables tables;                  // the cache group's block tables of the step
    int32_t* slots = nullptr;            // [n_tokens, width], row t at slots + t·slots_row_stride
    int64_t n_tokens = 0;
    int64_t width = 0;                   // entries per row, ≥ 0
    int64_t ratio = 1;                   // positions per entry, ≥ 1
    int64_t block_size = 0;              // entries per cache block, ≥ 1
    int64_t n_slots = 0;                 // slots of the cache group: every produced slot is < n_slots ≤ 2^31
    int64_t selected_row_stride = 0;     // elements, ≥ 0
    int64_t slots_row_stride = 0;        // elements, ≥ width when n_tokens > 1
};

// Shapes, strides, pointer presence, slots disjoint from every input.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SelectedSlotsParams& p);
// Positions ≥ 0, token_request rows in range, and every entry read (0 ≤ e_j < visible) in a resident
// block of its row that yields a slot < n_slots.
Status check_indices(const SelectedSlotsParams& p);

}  // namespace sieve

// ref selected_slots (ops/selected_slots.h): the contract's formula, one entry at a time.
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/selected_slots.h"

namespace sieve::ref {

Status selected_slots(const SelectedSlotsParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t visible = (p.positions[t] + 1) / p.ratio;
        const int32_t* row = p.tables.block_table + p.tables.token_request[t] * p.tables.block_table_stride;
        const bool every = p.selected == nullptr || (p.n_scored != nullptr && p.n_scored[t] == 0);
        for (int64_t j = 0; j < p.width; ++j) {
            const int64_t e = every ? j : p.selected[t * p.selected_row_stride + j];
            p.slots[t * p.slots_row_stride + j] =
                e >= 0 && e < visible ? static_cast<int32_t>(paged_slot(row, e, p.block_size)) : -1;
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref

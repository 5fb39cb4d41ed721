#include "sieve/ops/qsa_pool.h"

#include "sieve/ops/op_common.h"
#include "sieve/ops/block_tables.h"

namespace sieve {

Status validate(const QsaPoolParams& p) {
    constexpr const char* op = "qsa_pool";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "key_type", p.key_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "out_type", p.out_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_groups", p.n_groups, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "ratio", p.ratio, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    SIEVE_ASSIGN_OR_RETURN(int64_t out_extent,
                           output_rows_extent(op, "out", {p.n_groups, 1, p.head_dim, p.out_row_stride, 0},
                                              dtype_size(p.out_type)));
    if (p.n_groups == 0) return Status::ok();
    SIEVE_ASSIGN_OR_RETURN(int64_t key_bytes, bytes_of(op, "key row", p.head_dim, dtype_size(p.key_type)));
    SIEVE_RETURN_IF_ERROR(validate_paged_view(op, "keys", p.keys, key_bytes));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "member_slots", p.member_slots));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    int64_t n_slots = 0;
    if (__builtin_mul_overflow(p.n_groups, p.ratio, &n_slots))
        return invalid_argument_error("{}: member_slots [{}, {}] overflows int64", op, p.n_groups, p.ratio);
    return require_same_or_disjoint(op, "member_slots", p.member_slots, n_slots * 8, "out", p.out,
                                    out_extent * static_cast<int64_t>(dtype_size(p.out_type)), false);
}

Status check_indices(const QsaPoolParams& p) {
    constexpr const char* op = "qsa_pool";
    const int64_t n_slots = p.n_groups * p.ratio;  // validate checked that it fits int64
    for (int64_t i = 0; i < n_slots; ++i)
        if (p.member_slots[i] < 0)
            return invalid_argument_error("{}: member_slots[{}, {}] = {}: a group member is not resident", op,
                                          i / p.ratio, i % p.ratio, p.member_slots[i]);
    return Status::ok();
}

}  // namespace sieve

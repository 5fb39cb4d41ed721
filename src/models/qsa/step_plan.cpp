#include "models/qsa/step_plan.h"

#include <algorithm>
#include <climits>
#include <span>

namespace sieve::qsa {

int64_t StepPlan::bytes() const {
    size_t b = uploads.capacity();
    for (const auto* v : {&seq_lens, &completing, &member_slot_list, &pool_position_list}) b += v->capacity() * 8;
    for (const auto* v : {&n_groups, &kv_table_rows, &compressed_table_rows, &kv_slot_list, &ring_slot_list,
                          &compressed_slot_list})
        b += v->capacity() * 4;
    return static_cast<int64_t>(b);
}

Status build_step_plan(const QsaConfig& c, Backend& backend, const StepBatch& batch, StepPlan& plan) {
    plan.signature = batch.signature();
    plan.kv = batch.caches.find(kKvCache);
    plan.compressed = batch.caches.find(kCompressedCache);
    plan.ring = batch.caches.find(kRingCache);
    if (!plan.kv || !plan.compressed || !plan.ring)
        return internal_error("QSA step: the step lacks one of the cache groups {}, {}, {}", kKvCache,
                              kCompressedCache, kRingCache);
    for (const CacheGroup* g : {plan.kv, plan.ring, plan.compressed})
        if (g->n_slots() > INT32_MAX)
            return unsupported_error("QSA step: the '{}' cache has {} slots; the ops address them as int32", g->name(),
                                     g->n_slots());
    const int64_t T = batch.n_tokens(), r = c.indexer_compress_ratio;

    // ---- per-token metadata (§6) ----
    plan.seq_lens.resize(static_cast<size_t>(T));
    plan.n_groups.resize(static_cast<size_t>(T));
    plan.completing.clear();
    plan.kv_slot_list.resize(static_cast<size_t>(T));
    plan.ring_slot_list.resize(static_cast<size_t>(T));
    int64_t max_cols = 0, max_visible = 0;
    for (int64_t t = 0; t < T; ++t) {
        const auto i = static_cast<size_t>(t);
        const int64_t p = batch.positions[i];
        const int64_t L = batch.requests[static_cast<size_t>(batch.token_request[i])].end();
        plan.seq_lens[i] = L;
        const int64_t visible = std::min((p + 1) / r, L / r);  // §4.5
        plan.n_groups[i] = static_cast<int32_t>(visible > c.block_topk ? visible : 0);
        max_cols = std::max<int64_t>(max_cols, plan.n_groups[i]);
        max_visible = std::max(max_visible, visible);
        if ((p + 1) % r == 0) plan.completing.push_back(t);
    }
    SIEVE_RETURN_IF_ERROR(token_slots(batch, *plan.kv, plan.kv_slot_list.data()));
    SIEVE_RETURN_IF_ERROR(token_slots(batch, *plan.ring, plan.ring_slot_list.data()));
    plan.max_cols = max_cols;
    // The step's selection widths: k_top = min(block_topk, the most groups a token of the step sees), at
    // least 1, and W = k_top·r + r − 1 token slots (§4.6). A token seeing at most block_topk groups takes
    // them all (ops/qsa_expand.h), whichever of the two is the bound, so rows are never wider than the step
    // can fill, however far indexer_budget exceeds the context; a scored step has k_top = block_topk.
    plan.k_top = std::max<int64_t>(1, std::min(c.block_topk, max_visible));
    plan.width = plan.k_top * r + r - 1;

    // ---- the groups completed in this step: ring members, RoPE positions, compressed entries (§4.3, §5.3) ----
    const int64_t n_new = plan.n_new();
    plan.member_slot_list.resize(static_cast<size_t>(n_new * r));
    plan.pool_position_list.resize(static_cast<size_t>(n_new));
    plan.compressed_slot_list.resize(static_cast<size_t>(n_new));
    std::vector<int32_t> member32;  // one group's ring slots (the pool op takes them as int64)
    for (int64_t i = 0; i < n_new; ++i) {
        const int64_t t = plan.completing[static_cast<size_t>(i)];
        const RequestId id = batch.request_of_token(t);
        const int64_t g = batch.positions[static_cast<size_t>(t)] / r;
        member32.resize(static_cast<size_t>(r));
        SIEVE_RETURN_IF_ERROR(resident_entry_slots(*plan.ring, id, g * r, (g + 1) * r, member32.data()));
        std::copy(member32.begin(), member32.end(), plan.member_slot_list.begin() + i * r);
        plan.pool_position_list[static_cast<size_t>(i)] = g * r;  // RoPE at the group's FIRST position (§4.3)
        SIEVE_RETURN_IF_ERROR(resident_entry_slots(*plan.compressed, id, g, g + 1,
                                                   plan.compressed_slot_list.data() + i));
    }

    // ---- block tables, then everything to the device at once ----
    const int64_t kv_stride = pack_block_tables(batch, *plan.kv, plan.kv_table_rows);
    const int64_t comp_stride = pack_block_tables(batch, *plan.compressed, plan.compressed_table_rows);
    StepUploads& up = plan.uploads;
    up.reset();
    SIEVE_ASSIGN_OR_RETURN(plan.positions, up.put(backend, std::span<const int64_t>(batch.positions), "the step's positions"));
    SIEVE_ASSIGN_OR_RETURN(const int32_t* token_request,
                           up.put(backend, std::span<const int32_t>(batch.token_request), "token requests"));
    SIEVE_ASSIGN_OR_RETURN(plan.seq_lens_d, up.put(backend, std::span<const int64_t>(plan.seq_lens), "request lengths"));
    SIEVE_ASSIGN_OR_RETURN(plan.n_groups_d, up.put(backend, std::span<const int32_t>(plan.n_groups), "groups per token"));
    SIEVE_ASSIGN_OR_RETURN(const int32_t* kv_table,
                           up.put(backend, std::span<const int32_t>(plan.kv_table_rows), "KV block tables"));
    SIEVE_ASSIGN_OR_RETURN(const int32_t* comp_table, up.put(backend, std::span<const int32_t>(plan.compressed_table_rows),
                                                             "compressed-key block tables"));
    plan.kv_tables = {kv_table, token_request, batch.n_requests(), kv_stride};
    plan.compressed_tables = {comp_table, token_request, batch.n_requests(), comp_stride};
    SIEVE_ASSIGN_OR_RETURN(plan.kv_slots, up.put(backend, std::span<const int32_t>(plan.kv_slot_list), "KV cache slots"));
    SIEVE_ASSIGN_OR_RETURN(plan.ring_slots,
                           up.put(backend, std::span<const int32_t>(plan.ring_slot_list), "raw-key ring slots"));
    SIEVE_ASSIGN_OR_RETURN(plan.member_slots,
                           up.put(backend, std::span<const int64_t>(plan.member_slot_list), "group member slots"));
    SIEVE_ASSIGN_OR_RETURN(plan.pool_positions,
                           up.put(backend, std::span<const int64_t>(plan.pool_position_list), "group positions"));
    SIEVE_ASSIGN_OR_RETURN(plan.compressed_slots, up.put(backend, std::span<const int32_t>(plan.compressed_slot_list),
                                                         "compressed-key slots"));
    return Status::ok();
}

}  // namespace sieve::qsa

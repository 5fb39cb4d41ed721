#include "models/deepseek_v4/step_slots.h"

#include <algorithm>

#include "sieve/ops/block_tables.h"

namespace sieve::dsv4 {

namespace {

// out[j] = slot of entry end − width + j, −1 for entries < 0: a window of the request's entries ending at
// `end` (exclusive). out: [width]
Status window_entry_slots(const CacheGroup& c, RequestId request, int64_t end, int64_t width, int32_t* out) {
    const int64_t begin = end - width, none = std::clamp<int64_t>(-begin, 0, width);
    std::fill(out, out + none, -1);
    return resident_entry_slots(c, request, begin + none, end, out + none);
}

}  // namespace

Expected<BoundCache> bind_cache(const StepBatch& batch, const CacheBinding& binding) {
    const CacheGroup* g = batch.caches.find(binding.group);
    if (g == nullptr) return internal_error("the step has no cache group {}", binding.group);
    if (binding.layer_slot < 0 || binding.layer_slot >= g->n_layers())
        return internal_error("cache group {} has {} layer storages, asked for {}", binding.group, g->n_layers(),
                              binding.layer_slot);
    return BoundCache{g->view(binding.layer_slot), g->n_slots()};
}

CacheStoreParams record_store(const void* x, DType x_type, int64_t x_row_stride, int64_t n_rows, const int32_t* slots,
                              const BoundCache& cache, const CacheRecordLayout& layout) {
    CacheStoreParams p = whole_row_store(x, x_type, x_row_stride, n_rows, slots, cache.view, cache.n_slots, layout);
    p.round_bf16 = true;
    return p;
}

Status window_slots(const StepBatch& batch, const CacheGroup& cache, int64_t window, int32_t* out) {
    for (int64_t t = 0; t < batch.n_tokens(); ++t) {
        const int64_t p = batch.positions[static_cast<size_t>(t)];
        SIEVE_RETURN_IF_ERROR(window_entry_slots(cache, batch.request_of_token(t), p + 1, window, out + t * window));
    }
    return Status::ok();
}

int64_t count_emissions(const StepBatch& batch, int64_t ratio) {
    int64_t n = 0;
    for (int64_t p : batch.positions) n += (p + 1) % ratio == 0;
    return n;
}

Status emission_slots(const StepBatch& batch, const CacheGroup& state, const CacheGroup& dest, int64_t ratio,
                      bool overlap, int32_t* gather, int32_t* entry_slots, int64_t* entry_positions) {
    const int64_t rows = (overlap ? 2 : 1) * ratio;
    int64_t e = 0;
    for (int64_t t = 0; t < batch.n_tokens(); ++t) {
        const int64_t p = batch.positions[static_cast<size_t>(t)];
        if ((p + 1) % ratio != 0) continue;
        const RequestId r = batch.request_of_token(t);
        const int64_t k = (p + 1) / ratio - 1;
        SIEVE_RETURN_IF_ERROR(window_entry_slots(state, r, p + 1, rows, gather + e * rows));
        SIEVE_RETURN_IF_ERROR(resident_entry_slots(dest, r, k, k + 1, entry_slots + e));
        entry_positions[e] = k * ratio;  // §3.4: rotated at k·m, the first token of its own block
        ++e;
    }
    return Status::ok();
}

Status check_visible_entries(const StepBatch& batch, const CacheGroup& cache, int64_t ratio) {
    for (const StepRequest& r : batch.requests)
        SIEVE_RETURN_IF_ERROR(resident_entry_slots(cache, r.id, 0, r.end() / ratio, nullptr));
    return Status::ok();
}

int64_t max_request_entries(const StepBatch& batch, int64_t ratio) {
    int64_t w = 0;
    for (const StepRequest& r : batch.requests) w = std::max(w, r.end() / ratio);
    return w;
}

}  // namespace sieve::dsv4

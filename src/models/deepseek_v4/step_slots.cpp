#include "models/deepseek_v4/step_slots.h"

#include <algorithm>
#include <limits>

namespace sieve::dsv4 {

namespace {

Expected<int32_t> resident(const CacheGroup& c, RequestId request, int64_t entry) {
    const int64_t s = c.slot(request, entry);
    if (s < 0)
        return internal_error("cache {}: entry {} of request {} is not resident (the runtime released or never "
                              "reserved it)",
                              c.name(), entry, request);
    if (s > std::numeric_limits<int32_t>::max())
        return unsupported_error("cache {}: slot {} does not fit the int32 slot lists of the ops", c.name(), s);
    return static_cast<int32_t>(s);
}

// Slots of entries [0, n) of `request`, block by block: one table lookup per request rather than one per
// entry (a 128K-token request has 32K CSA entries, and the lookups per entry took 0.15 ms of a 2 ms
// decode indexer stage). out == nullptr only checks them. Errors as resident().
Status leading_entry_slots(const CacheGroup& c, RequestId request, int64_t n, int32_t* out) {
    const std::vector<int32_t>& table = c.block_table(request);
    const int64_t bs = c.block_size();
    for (int64_t b = 0; b * bs < n; ++b) {
        const int64_t e0 = b * bs, e1 = std::min(n, e0 + bs);
        const int64_t block = b < static_cast<int64_t>(table.size()) ? table[static_cast<size_t>(b)] : -1;
        if (block < 0) return resident(c, request, e0).status();
        if (block * bs + (e1 - e0 - 1) > std::numeric_limits<int32_t>::max()) return resident(c, request, e1 - 1).status();
        if (out != nullptr)
            for (int64_t e = e0; e < e1; ++e) out[e] = static_cast<int32_t>(block * bs + (e - e0));
    }
    return Status::ok();
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
    CacheStoreParams p;
    p.x = x;
    p.x_type = x_type;
    p.x_row_stride = x_row_stride;
    p.slots = slots;
    p.cache = cache.view;
    p.layout = layout;
    p.n_slots = cache.n_slots;
    p.n_rows = n_rows;
    p.dim = layout.dim;
    p.round_bf16 = true;
    return p;
}

Status token_slots(const StepBatch& batch, const CacheGroup& cache, int32_t* out) {
    for (int64_t t = 0; t < batch.n_tokens(); ++t) {
        SIEVE_ASSIGN_OR_RETURN(out[t], resident(cache, batch.request_of_token(t), batch.positions[static_cast<size_t>(t)]));
    }
    return Status::ok();
}

Status window_slots(const StepBatch& batch, const CacheGroup& cache, int64_t window, int32_t* out) {
    for (int64_t t = 0; t < batch.n_tokens(); ++t) {
        const int64_t p = batch.positions[static_cast<size_t>(t)];
        const RequestId r = batch.request_of_token(t);
        for (int64_t j = 0; j < window; ++j) {
            const int64_t pos = p - window + 1 + j;
            if (pos < 0) {
                out[t * window + j] = -1;
                continue;
            }
            SIEVE_ASSIGN_OR_RETURN(out[t * window + j], resident(cache, r, pos));
        }
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
        for (int64_t j = 0; j < rows; ++j) {
            const int64_t pos = p - rows + 1 + j;
            if (pos < 0) {
                gather[e * rows + j] = -1;
                continue;
            }
            SIEVE_ASSIGN_OR_RETURN(gather[e * rows + j], resident(state, r, pos));
        }
        SIEVE_ASSIGN_OR_RETURN(entry_slots[e], resident(dest, r, k));
        entry_positions[e] = k * ratio;  // §3.4: rotated at k·m, the first token of its own block
        ++e;
    }
    return Status::ok();
}

Status check_visible_entries(const StepBatch& batch, const CacheGroup& cache, int64_t ratio) {
    for (const StepRequest& r : batch.requests)
        SIEVE_RETURN_IF_ERROR(leading_entry_slots(cache, r.id, r.end() / ratio, nullptr));
    return Status::ok();
}

int64_t max_request_entries(const StepBatch& batch, int64_t ratio) {
    int64_t w = 0;
    for (const StepRequest& r : batch.requests) w = std::max(w, r.end() / ratio);
    return w;
}

Status request_entry_slots(const StepBatch& batch, const CacheGroup& cache, int64_t ratio, int64_t width, int32_t* out) {
    for (int64_t i = 0; i < batch.n_requests(); ++i) {
        const StepRequest& r = batch.requests[static_cast<size_t>(i)];
        const int64_t n = std::min(width, r.end() / ratio);
        SIEVE_RETURN_IF_ERROR(leading_entry_slots(cache, r.id, n, out + i * width));
        std::fill(out + i * width + n, out + (i + 1) * width, -1);
    }
    return Status::ok();
}

}  // namespace sieve::dsv4

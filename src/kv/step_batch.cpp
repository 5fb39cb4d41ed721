#include "sieve/kv/step_batch.h"

#include <algorithm>
#include <limits>

#include "sieve/ops/block_tables.h"

namespace sieve {

int64_t StepBatch::max_visible_entries(int64_t ratio) const {
    int64_t w = 0;
    for (int64_t p : positions) w = std::max(w, (p + 1) / ratio);
    return w;
}

std::vector<int64_t> StepBatch::signature() const {
    std::vector<int64_t> s;
    s.reserve(requests.size() * 3);
    for (const StepRequest& r : requests) s.insert(s.end(), {static_cast<int64_t>(r.id), r.start, r.n_tokens});
    return s;
}

StepBatch make_step_batch(std::vector<StepRequest> requests, StepCaches caches) {
    StepBatch b;
    b.requests = std::move(requests);
    b.caches = std::move(caches);
    b.query_start_loc.reserve(b.requests.size() + 1);
    b.query_start_loc.push_back(0);
    for (size_t r = 0; r < b.requests.size(); ++r) {
        const StepRequest& req = b.requests[r];
        for (int64_t i = 0; i < req.n_tokens; ++i) {
            b.positions.push_back(req.start + i);
            b.token_request.push_back(static_cast<int32_t>(r));
        }
        b.query_start_loc.push_back(b.query_start_loc.back() + req.n_tokens);
    }
    return b;
}

int64_t pack_block_tables(const StepBatch& batch, const CacheGroup& group, std::vector<int32_t>& table) {
    int64_t stride = 1;
    for (const StepRequest& r : batch.requests)
        stride = std::max<int64_t>(stride, static_cast<int64_t>(group.block_table(r.id).size()));
    table.assign(static_cast<size_t>(batch.n_requests() * stride), -1);
    for (int64_t q = 0; q < batch.n_requests(); ++q) {
        const std::vector<int32_t>& row = group.block_table(batch.requests[static_cast<size_t>(q)].id);
        std::copy(row.begin(), row.end(), table.begin() + q * stride);
    }
    return stride;
}

Status resident_entry_slots(const CacheGroup& group, RequestId request, int64_t begin, int64_t end, int32_t* out) {
    constexpr int64_t kMaxSlot = std::numeric_limits<int32_t>::max();
    const std::vector<int32_t>& table = group.block_table(request);
    const int64_t bs = group.block_size();
    for (int64_t e0 = begin; e0 < end;) {
        const int64_t b = e0 / bs, e1 = std::min(end, (b + 1) * bs);
        if (e0 < 0 || b >= static_cast<int64_t>(table.size()) || table[static_cast<size_t>(b)] < 0)
            return internal_error("cache {}: entry {} of request {} is not resident (the runtime released or never "
                                  "reserved it)",
                                  group.name(), e0, request);
        const int64_t first = paged_slot(table.data(), e0, bs);  // the block's entries are consecutive slots
        if (first + (e1 - 1 - e0) > kMaxSlot)
            return unsupported_error("cache {}: slot {} does not fit the int32 slot lists of the ops", group.name(),
                                     std::max(first, kMaxSlot + 1));
        if (out != nullptr)
            for (int64_t e = e0; e < e1; ++e) out[e - begin] = static_cast<int32_t>(first + (e - e0));
        e0 = e1;
    }
    return Status::ok();
}

Status token_slots(const StepBatch& batch, const CacheGroup& group, int32_t* out) {
    for (int64_t t = 0; t < batch.n_tokens(); ++t) {
        const int64_t p = batch.positions[static_cast<size_t>(t)];
        SIEVE_RETURN_IF_ERROR(resident_entry_slots(group, batch.request_of_token(t), p, p + 1, out + t));
    }
    return Status::ok();
}

}  // namespace sieve

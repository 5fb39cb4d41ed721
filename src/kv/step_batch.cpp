#include "kv/step_batch.h"

#include <algorithm>

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

}  // namespace sieve

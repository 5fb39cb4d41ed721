#include "models/step_block_tables.h"

#include <algorithm>

namespace sieve {

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

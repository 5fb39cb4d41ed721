// Thread-pool helper of the cpu backend's dispatch code (baseline translation units only).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace sieve::cpu {

// f(begin, end) over chunks of [0, n) of at least min_chunk items, on the pool; inline when one
// chunk suffices. The std::function the pool takes wraps one pointer, so it stays in its small
// buffer: no allocation (the cpu backend's run methods allocate nothing).
template <typename F>
void parallel_chunks(ThreadPool& pool, int64_t n, int64_t min_chunk, const F& f) {
    if (n <= 0) return;
    if (pool.size() <= 1 || n <= min_chunk) {
        f(int64_t{0}, n);
        return;
    }
    const F* fp = &f;
    pool.parallel_for(n, [fp](int64_t b, int64_t e) { (*fp)(b, e); }, min_chunk);
}

// Items per chunk so that a chunk holds at least ~work_per_chunk units when one item costs item_cost.
inline int64_t min_chunk_for(int64_t item_cost, int64_t work_per_chunk = 32768) {
    if (item_cost <= 0) return 1;
    const int64_t c = work_per_chunk / item_cost;
    return c < 1 ? 1 : c;
}

}  // namespace sieve::cpu

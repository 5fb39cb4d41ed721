#include "ops/dsa_cache_check.h"

namespace sieve::dsa_check {

Status cache_view(std::string_view op, const CacheView& cache, int64_t expected_entry_bytes, int64_t n_slots) {
    if (cache.block_size < 1)
        return invalid_argument_error("{}: cache block_size = {}, expected ≥ 1", op, cache.block_size);
    if (cache.entry_bytes != expected_entry_bytes)
        return invalid_argument_error("{}: cache entry_bytes = {}, the format needs {}", op, cache.entry_bytes,
                                      expected_entry_bytes);
    int64_t block_min = 0, extent = 0;
    if (__builtin_mul_overflow(cache.block_size, cache.entry_bytes, &block_min) || cache.block_bytes < block_min)
        return invalid_argument_error("{}: cache block_bytes = {} < block_size {} · entry_bytes {}", op,
                                      cache.block_bytes, cache.block_size, cache.entry_bytes);
    if (n_slots < 0 || n_slots % cache.block_size != 0)
        return invalid_argument_error("{}: n_slots = {}, expected a multiple of block_size {} (whole blocks)", op,
                                      n_slots, cache.block_size);
    if (__builtin_mul_overflow(n_slots / cache.block_size, cache.block_bytes, &extent))
        return invalid_argument_error("{}: {} blocks of {} bytes overflow int64", op, n_slots / cache.block_size,
                                      cache.block_bytes);
    if (n_slots > 0 && cache.base == nullptr) return invalid_argument_error("{}: cache base is null", op);
    return Status::ok();
}

}  // namespace sieve::dsa_check

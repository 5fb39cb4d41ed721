// cp.async (sm_80+): copies from global to shared memory that travel while the thread goes on, shared by
// the kernels that stage their next tile or chunk during the current one (indexer_scores_mma.cu,
// attention_kernels.cu). A thread's copies land once it waits for their group; other threads see them after
// a barrier that follows the wait.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sieve::cuda::async_copy {

// kBytes (4, 8 or 16) from global src to the shared address dst, of which the first src_bytes (kBytes or 0)
// are read and the rest zero-filled. 16-byte copies bypass L1 (.cg); smaller ones can only go through it
// (.ca).
template <int kBytes>
__device__ __forceinline__ void copy_zfill(uint32_t dst, const void* src, int src_bytes) {
    const size_t global = __cvta_generic_to_global(src);
    if constexpr (kBytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(src_bytes) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(global), "n"(kBytes), "r"(src_bytes)
                     : "memory");
    }
}
template <int kBytes>
__device__ __forceinline__ void copy(uint32_t dst, const void* src) { copy_zfill<kBytes>(dst, src, kBytes); }

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's newest groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace sieve::cuda::async_copy

// cp.async (sm_80+) and bulk copies (sm_90): copies from global to shared memory that travel while the
// thread goes on, shared by the kernels that stage their next tile or chunk during the current one
// (indexer_scores_mma.cu, attention_kernels.cu). A thread's cp.async copies land once it waits for their
// group; other threads see them after a barrier that follows the wait.
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

// Bulk copies (sm_90): one thread moves `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
// to shared memory, and the copy's completion counts against an mbarrier's expected transaction bytes. A
// phase of the barrier completes when all its arrivals (mbarrier_init's count; each arrive_expect_tx also
// announces bytes) have happened and every announced byte has landed; waiting on the phase's parity then
// makes the bytes visible.
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// After the inits, before the barriers are used (by the copy engine too).
__device__ __forceinline__ void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// One arrival (release: this thread's earlier writes are visible to the threads that wait on the phase).
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(bar)
                 : "memory");
}
// A tensor copy (sm_90): one thread moves the box of the tensor map `map` (a __grid_constant__ kernel
// parameter) at coordinates (c0, c1, c2) into shared memory at dst, laid out as the map says (its swizzle
// wants dst aligned to the swizzle's atom); completion counts against the mbarrier as for bulk_copy.
__device__ __forceinline__ void tensor_copy_3d(uint32_t dst, const void* map, int32_t c0, int32_t c1, int32_t c2, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
            dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
// An arrival on the mbarrier once every cp.async this thread issued before it has landed (.noinc: the
// barrier's init count includes these arrivals), so that waiting on the phase also covers those copies.
__device__ __forceinline__ void mbarrier_arrive_on_copies(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Orders this thread's earlier shared-memory accesses (ordinary loads and stores) before later bulk copies
// into the same bytes.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace sieve::cuda::async_copy

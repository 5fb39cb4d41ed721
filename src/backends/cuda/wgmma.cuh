// Warpgroup tensor-core primitives (sm_90a wgmma.mma_async, PTX ISA "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate"): the shared-memory matrix descriptor of the 128-byte-swizzled layout, the fences and
// waits that order wgmma with ordinary instructions, the instruction shapes the kernels use (the sparse
// attention's two, the Lightning Indexer's f16 one), and the register reallocation of warp-specialized
// warpgroups.
//
// A warpgroup is 4 consecutive warps (128 threads); an m64 tile gives warp w of the group rows 16w … 16w + 15.
// Register fragments (g = lane / 4, t = lane % 4), each 32-bit register two bf16 values, the lower index low:
//   D (64 × N, fp32)  d[4j + 0, 1]: (row g, cols 8j + 2t, 8j + 2t + 1)  d[4j + 2, 3]: (row g + 8, same cols)
//                     — the mma.sync m16n8 C fragment (mma_sync.cuh), once per 8 columns
//   A (64 × 16, bf16) the mma.sync m16n8k16 A fragment of the warp's 16 rows (mma_sync.cuh)
//
// Shared-memory operands in the 128-byte swizzle (CUTLASS's canonical GMMA layouts; every tile 1024-byte
// aligned): a "slab" holds 64 bf16 values (128 bytes) of each of its rows, rows 128 bytes apart; the 16-byte
// chunk c of row r lies at chunk c ^ (r % 8) of that row (swizzle_chunk). A matrix of more than 64 values
// per row is several slabs.
//   K-major (A = q rows, B = cache entries for q·Kᵀ: the k values of a row are contiguous): one descriptor per
//     k-step of 16 values, starting 32 bytes further inside the slab for each step; SBO = 1024 bytes (the next 8
//     rows), LBO unused.
//   MN-major (B = V for P·V: an entry's values, the n dimension, are contiguous): SBO = 1024 bytes (the next 8
//     entries along k), LBO = the slab stride (the next 64 values along n).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace sieve::cuda::wgmma {

constexpr int kSlabValues = 64;    // bf16 values per slab row (128 bytes)
constexpr int kSwizzleRows = 8;    // rows of one swizzle atom (1024 bytes)
constexpr int kAtomBytes = 1024;

// Byte offset of 16-byte chunk `chunk` (0 … 7) of row `row` inside its slab.
__host__ __device__ constexpr uint32_t swizzle_chunk(int row, int chunk) {
    return static_cast<uint32_t>(row * 128 + ((chunk ^ (row % kSwizzleRows)) << 4));
}

// The descriptor of a 128-byte-swizzled operand at shared address `address` (PTX "Matrix Descriptor Format":
// start address, leading and stride byte offsets in 16-byte units, swizzle mode 1 = 128 bytes in bits 62–63).
__device__ __forceinline__ uint64_t sw128_descriptor(uint32_t address, uint32_t leading_bytes, uint32_t stride_bytes) {
    return static_cast<uint64_t>((address & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
           (static_cast<uint64_t>(stride_bytes >> 4) << 32) | (1ull << 62);
}

// Before the first wgmma that reads registers (accumulators, A fragments) other instructions wrote.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending of the warpgroup's newest committed groups are in flight; their accumulators
// and the registers and shared memory they read are then free.
template <int kPending>
__device__ __forceinline__ void wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Makes this thread's ordinary shared-memory stores visible to wgmma's operand reads (the async proxy); a
// barrier between the stores and the wgmma must follow.
__device__ __forceinline__ void fence_operands() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// f(std::integral_constant<int, i>{}) for i = 0 … N − 1: the instructions below take their descriptor offsets as
// immediates, so that loops over k-steps stay unrolled at compile time.
template <int... I, class F>
__device__ __forceinline__ void for_each_index(std::integer_sequence<int, I...>, F&& f) {
    (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
__device__ __forceinline__ void for_each_index(F&& f) {
    for_each_index(std::make_integer_sequence<int, N>{}, static_cast<F&&>(f));
}

// Keeps the compiler from moving reads or writes of registers that wgmma reads or writes (accumulators, A
// fragments) across the fences and waits: pin them before fence() and after wait().
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void pin(uint32_t (&a)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// Warpgroup register reallocation (sm_90): a warp-specialized kernel launched with fewer registers per thread
// than its math warpgroups need hands the producers' spare registers to them. Every warp of the warpgroup
// executes it; kRegisters a multiple of 8 in [24, 256].
template <int kRegisters>
__device__ __forceinline__ void grow_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void shrink_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// d[0 … 16) += A · B over k16 (m64n32k16): A and B in shared memory, K-major, at descriptors a_desc and b_desc
// moved kOffsetA and kOffsetB bytes on (A and B may have different slab strides); scale_d = 0 overwrites d.
template <uint32_t kOffsetA, uint32_t kOffsetB>
__device__ __forceinline__ void mma_ss_m64n32k16(float (&d)[16], uint64_t a_desc, uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\n"
        "setp.ne.b32 p, %18, 0;\nadd.s64 da, %16, %19;\nadd.s64 db, %17, %20;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, da, db, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(static_cast<uint64_t>(kOffsetA >> 4)),
          "n"(static_cast<uint64_t>(kOffsetB >> 4)));
}

// d[0 … 64) += A · B over k16 (m64n128k16): A in registers (the mma.sync m16n8k16 A fragment of the warp's
// 16 rows), B in shared memory, MN-major (transposed), at b_desc moved kOffset bytes on (as above).
template <uint32_t kOffset>
__device__ __forceinline__ void mma_rs_m64n128k16_bt(float (&d)[64], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 db;\n"
        "setp.ne.b32 p, %69, 0;\nadd.s64 db, %68, %70;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, db, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(static_cast<uint64_t>(kOffset >> 4)));
}

// d[0 … 32) += A · B over k16 (m64n64k16): f16 operands (kHalf) or bf16 ones. A in registers (the mma.sync
// m16n8k16 A fragment of the warp's 16 rows, pairs of the operand type), B in shared memory, K-major, at b_desc
// moved kOffset bytes on.
#define SIEVE_WGMMA_M64N64K16_RS(TYPE)                                                                                   \
    asm volatile(                                                                                                        \
        "{\n.reg .pred p;\n.reg .b64 db;\n"                                                                              \
        "setp.ne.b32 p, %37, 0;\nadd.s64 db, %36, %38;\n"                                                                 \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " {"                                                 \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                         \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                 \
        "}, {%32, %33, %34, %35}, db, p, 1, 1, 0;\n}\n"                                                                  \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),   \
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),        \
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),       \
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                      \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d), "n"(static_cast<uint64_t>(kOffset >> 4)))
template <uint32_t kOffset, bool kHalf>
__device__ __forceinline__ void mma_rs_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
    if constexpr (kHalf)
        SIEVE_WGMMA_M64N64K16_RS("f16");
    else
        SIEVE_WGMMA_M64N64K16_RS("bf16");
}
#undef SIEVE_WGMMA_M64N64K16_RS

}  // namespace sieve::cuda::wgmma

// Warp-level tensor-core primitives (PTX mma.sync m16n8k16 with fp32 accumulation, ldmatrix) and the
// exact operand conversions the kernels feed them, shared by every tensor-core kernel of the backend.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A (16 × 16, row-major)  a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16 × 8, k × n)       b0: (k 2t..2t+1, n g)  b1: (k 2t+8.., n g)
//   C (16 × 8, fp32)        c0, c1: (g, 2t, 2t+1)  c2, c3: (g+8, 2t, 2t+1)
// Each 32-bit register holds two 16-bit values, the lower index in the low half.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace sieve::cuda::mma {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8 × 8 matrices of 16-bit values; lane l gives the (shared) address of row l % 8 of matrix l / 8.
// volatile: a shared-memory read the compiler must keep between the barriers around it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) { ldmatrix_x4(r, smem_address(p)); }
// The same, each matrix transposed (a k-major B operand).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
}
// Two matrices; lanes 0 … 15 give the addresses.
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_address(p)));
}

// c += a · b with f16 (kHalf) or bf16 operands, fp32 accumulation. Not volatile: a pure function of its
// registers, which the compiler may schedule freely.
template <bool kHalf>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (kHalf) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two e4m3 values (the first in the low byte) as two f16 or bf16 values: exact (every e4m3 value is both).
template <bool kHalf>
__device__ __forceinline__ uint32_t e4m3x2_to_operand(uint32_t pair) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    if constexpr (kHalf) return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return static_cast<uint32_t>(__bfloat16_as_ushort(b.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b.y)) << 16);
}

// One fp32 value that is an f16 (kHalf) or bf16 value, as its bits (exact for such a value).
template <bool kHalf>
__device__ __forceinline__ uint16_t f32_to_operand(float v) {
    if constexpr (kHalf) return __half_as_ushort(__float2half_rn(v));
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// Two fp32 values as a bf16 pair, each rounded to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // one conversion instruction for both
    return static_cast<uint32_t>(__bfloat16_as_ushort(pair.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(pair.y)) << 16);
}

// x = head + tail with head = bf16(x) and tail = bf16(x − head): two bf16 terms carrying 16 significant
// bits, so that a bf16 product by an exact bf16 operand errs by at most 2^-16 |x| (not 2^-8). A non-finite
// head gets a zero tail (x − head would be NaN for an infinite x).
struct Bf16Split {
    float head, tail;
};
__device__ __forceinline__ Bf16Split split_bf16(float x) {
    const float head = __bfloat162float(__float2bfloat16_rn(x));
    const float tail = isfinite(head) ? __bfloat162float(__float2bfloat16_rn(x - head)) : 0.0f;
    return {head, tail};
}

// split_bf16 of a pair of finite or NaN values (a weight p ≤ 1, or p times a finite scale), packed as two bf16x2
// registers: the head pair and the tail pair. No infinity check: a NaN value gives NaN head and tail.
__device__ __forceinline__ void split_bf16x2(float x0, float x1, uint32_t& head, uint32_t& tail) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
    const float2 hf = __bfloat1622float2(h);
    const __nv_bfloat162 t = __floats2bfloat162_rn(x0 - hf.x, x1 - hf.y);
    head = *reinterpret_cast<const uint32_t*>(&h);
    tail = *reinterpret_cast<const uint32_t*>(&t);
}

// The P·V weights of AttentionMath::bf16 for two entries whose values carry fp32 scales s0, s1 (1 where they
// carry none): bf16(bf16(p)·s) each (ops/sparse_attention.h), packed as a bf16 pair; bf16(p) itself where the
// scale is a power of two.
__device__ __forceinline__ uint32_t bf16_weights_x2(float p0, float p1, float s0, float s1) {
    const float2 rounded = __bfloat1622float2(__floats2bfloat162_rn(p0, p1));
    return pack_bf16x2(rounded.x * s0, rounded.y * s1);
}

}  // namespace sieve::cuda::mma

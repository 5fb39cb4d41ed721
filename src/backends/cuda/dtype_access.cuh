// Element loads and stores of the activation dtypes (f32 | bf16) in device code, bit for bit the host's
// rules (core/dtype.h, backends/ref/ref_ops.h load/store): bf16 widens exactly; a bf16 store rounds to
// nearest even in integer arithmetic, and a NaN keeps its sign and top payload bits and is made quiet
// (0x7FC00000 → 0x7FC0). cvt.rn.bf16.f32 (what __float2bfloat16_rn compiles to) rounds finite values the
// same way but writes the canonical NaN 0x7FFF, which would break byte-identical results such as
// quant_fp8's poisoned groups (ops/quant_fp8.h).
#pragma once

#include <cstdint>

namespace sieve::cuda {

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// core/dtype.h f32_to_bf16.
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

__device__ __forceinline__ float load_act(const void* base, bool bf16, int64_t i) {
    return bf16 ? bf16_bits_to_f32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

__device__ __forceinline__ void store_act(void* base, bool bf16, int64_t i, float v) {
    if (bf16)
        static_cast<uint16_t*>(base)[i] = f32_to_bf16_bits(v);
    else
        static_cast<float*>(base)[i] = v;
}

}  // namespace sieve::cuda

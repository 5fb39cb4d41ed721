// Element loads and stores of the activation dtypes (f32 | bf16) in device code: bf16 widens exactly and
// narrows round-to-nearest-even (core/dtype.h's rules).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

namespace sieve::cuda {

__device__ __forceinline__ float load_act(const void* base, bool bf16, int64_t i) {
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]) : static_cast<const float*>(base)[i];
}

__device__ __forceinline__ void store_act(void* base, bool bf16, int64_t i, float v) {
    if (bf16)
        static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
    else
        static_cast<float*>(base)[i] = v;
}

}  // namespace sieve::cuda

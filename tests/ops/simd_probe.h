// Lane-wise results of the cpu/simd.h operations whose results depend on NaN and range rules, computed
// by one translation unit per ISA (simd_probe_<isa>.cpp, compiled with that ISA's flags), so that
// simd_nan_test.cpp can hold the scalar layer to the vector ones. Plain functions over plain arrays:
// nothing inline is shared between the units (cpu/simd.h, "ODR safety").
#pragma once

#include <cstdint>

namespace sieve::test {

// For n inputs (a multiple of 16): max[i] = vf_max(a[i], b[i]), min[i] = vf_min(a[i], b[i]),
// cvt[i] = vi_cvt_rne(a[i]), exp[i] = vf_exp_nonpositive(a[i]) (attention_kernels_impl.inl),
// bf16[i] = the bits vf_store_bf16 writes for a[i]; for every byte b < 256, e4m3_vector[b] =
// vf_e4m3_values' lane of b and e4m3_scalar[b] = s_e4m3_value(b) (the one e4m3 decoding of the kernels),
// e4m3_loaded[b] = vf_load_e4m3's lane of b (the linear's fp8 decode, NaN bytes aside).
struct SimdProbeOut {
    float* max;
    float* min;
    int32_t* cvt;
    float* exp;
    uint16_t* bf16;
    float* e4m3_vector;  // [256]
    float* e4m3_scalar;  // [256]
    float* e4m3_loaded;  // [256]
};

void simd_probe_scalar(const float* a, const float* b, int64_t n, const SimdProbeOut& out);
void simd_probe_avx2(const float* a, const float* b, int64_t n, const SimdProbeOut& out);
void simd_probe_avx512(const float* a, const float* b, int64_t n, const SimdProbeOut& out);

}  // namespace sieve::test

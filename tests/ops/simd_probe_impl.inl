// The body of simd_probe_<isa>.cpp (simd_probe.h), compiled once per ISA: the unit defines
// SIEVE_SIMD_PROBE as the function's name before including this file.
#include "backends/cpu/simd.h"
#include "backends/cpu/attention_kernels_impl.inl"
#include "simd_probe.h"

#ifndef SIEVE_SIMD_PROBE
#error "define SIEVE_SIMD_PROBE before including simd_probe_impl.inl"
#endif

namespace sieve::test {

void SIEVE_SIMD_PROBE(const float* a, const float* b, int64_t n, const SimdProbeOut& out) {
    using namespace sieve::cpu::SIEVE_CPU_ISA_NS;
    for (int64_t i = 0; i < n; i += kLanes) {
        const VF x = vf_load(a + i), y = vf_load(b + i);
        vf_store(out.max + i, vf_max(x, y));
        vf_store(out.min + i, vf_min(x, y));
        vi_store(out.cvt + i, vi_cvt_rne(x));
        vf_store(out.exp + i, vf_exp_nonpositive(x));
        vf_store_bf16(out.bf16 + i, x);
    }
    uint8_t bytes[256];
    for (int b = 0; b < 256; ++b) bytes[b] = static_cast<uint8_t>(b);
    for (int b = 0; b < 256; b += kLanes) vf_store(out.e4m3_vector + b, vf_e4m3_values(bytes + b));
    for (int b = 0; b < 256; ++b) out.e4m3_scalar[b] = s_e4m3_value(static_cast<uint8_t>(b));
    for (int b = 0; b < 256; b += kLanes) vf_store(out.e4m3_loaded + b, vf_load_e4m3(bytes + b));
}

}  // namespace sieve::test

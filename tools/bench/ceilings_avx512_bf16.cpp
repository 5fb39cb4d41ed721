// bf16 dot-product peak loop: vdpbf16ps (compiled with -mavx512bf16). Each instruction does 32
// bf16 products accumulated pairwise into 16 fp32 lanes: 64 floating-point operations.
#include <immintrin.h>

#include "ceilings.h"

namespace sieve::bench {

double dot_bf16_loop_avx512_bf16(int64_t iterations) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_setzero_ps();
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // 2^-24: sums stay small
    for (int64_t it = 0; it < iterations; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __m512 sum = acc[0];
    for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
    // Stored and summed by hand: g++ 12 warns falsely inside _mm512_reduce_add_ps.
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    volatile float sink = lanes[0] + lanes[15];
    (void)sink;
    return static_cast<double>(iterations) * 12 * 64;
}

}  // namespace sieve::bench

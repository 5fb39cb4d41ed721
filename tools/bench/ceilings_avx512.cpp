// fp32 FMA peak loop, AVX-512 (compiled with -mavx512f).
#include <immintrin.h>

#include "ceilings.h"

namespace sieve::bench {

double fma_f32_loop_avx512(int64_t iterations) {
    // Twelve independent accumulators hide the FMA latency (4 cycles × 2 ports + slack).
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t it = 0; it < iterations; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 sum = acc[0];
    for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
    // Stored and summed by hand: g++ 12 warns falsely inside _mm512_reduce_add_ps.
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, sum);
    volatile float sink = lanes[0] + lanes[15];
    (void)sink;
    return static_cast<double>(iterations) * 12 * 16 * 2;
}

}  // namespace sieve::bench

// fp32 FMA peak loop, AVX2 (compiled with -mavx2 -mfma).
#include <immintrin.h>

#include "ceilings.h"

namespace sieve::bench {

double fma_f32_loop_avx2(int64_t iterations) {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t it = 0; it < iterations; ++it)
        for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    __m256 sum = acc[0];
    for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    volatile float sink = lanes[0] + lanes[7];
    (void)sink;
    return static_cast<double>(iterations) * 12 * 8 * 2;
}

}  // namespace sieve::bench

// The machine's ceilings, measured in the same run as the benchmarks they judge (DESIGN.md: "a
// benchmark reports ratios against measured ceilings"): memory bandwidth (a STREAM-like triad over
// arrays far larger than the caches), fp32 FMA peak, bf16 dot-product (vdpbf16ps) peak and, where the
// processor has AMX, the bf16 tile (tdpbf16ps) peak, on one core and on all cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace sieve::bench {

struct Ceiling {
    std::string name;     // "triad bandwidth", "fp32 fma", "bf16 dot", "bf16 amx"
    std::string unit;     // "GB/s", "GFLOP/s"
    std::string isa;      // the kernel's ISA
    int threads = 1;
    double value = 0;     // the best repetition
    double spread = 0;    // (best − worst) / best over the repetitions: the noise
};

// Runs every ceiling the machine supports at 1 thread and at pool.size() threads.
// `quick` uses smaller arrays and fewer repetitions (for tests).
std::vector<Ceiling> measure_ceilings(ThreadPool& pool, bool quick);

// Keeps each ceiling of `into` or the same ceiling of `again`, whichever is higher, with its spread:
// a ceiling is a best-of estimate, and load only ever lowers it.
void keep_best(std::vector<Ceiling>& into, const std::vector<Ceiling>& again);

// Per-ISA peak loops (ceilings_<isa>.cpp): floating-point operations executed per call.
double fma_f32_loop_avx512(int64_t iterations);
double fma_f32_loop_avx2(int64_t iterations);
double dot_bf16_loop_avx512_bf16(int64_t iterations);
double dot_bf16_loop_amx(int64_t iterations);  // only at the amx_bf16 level (the tiles granted, core/cpu_features.h)

}  // namespace sieve::bench

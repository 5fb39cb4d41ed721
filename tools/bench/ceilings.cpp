#include "ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

namespace sieve::bench {

namespace {

using clock = std::chrono::steady_clock;

// Best rate and spread of `reps` timings of fn(), which returns the work units it did. A ceiling is what
// the machine can do, so the best repetition is the estimate (as STREAM reports); interference only ever
// lowers a rate, and the spread says how much of it there was.
Ceiling measure(const std::string& name, const std::string& unit, const std::string& isa, int threads, int reps,
                const std::function<double()>& fn) {
    std::vector<double> rates;
    fn();  // warm up: page faults, frequency ramp
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clock::now();
        const double work = fn();
        const double s = std::chrono::duration<double>(clock::now() - t0).count();
        rates.push_back(work / s / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    const double best = rates.back();
    return Ceiling{name, unit, isa, threads, best, best > 0 ? (best - rates.front()) / best : 0};
}

struct FreeAligned {
    void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeAligned>;
Buffer alloc_floats(size_t n) { return Buffer(static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)))); }

}  // namespace

std::vector<Ceiling> measure_ceilings(ThreadPool& pool, bool quick) {
    std::vector<Ceiling> out;
    const int reps = quick ? 3 : 7;
    const Isa isa = active_isa();
    ThreadPool one(1);
    for (ThreadPool* p : {&one, &pool}) {
        const int threads = p->size();
        if (p == &pool && threads == 1) break;
        // Triad a = b + s·c over three arrays much larger than the last-level cache. STREAM counts
        // 3 arrays × 4 bytes per element (the write-allocate read of `a` is not counted).
        const size_t n = quick ? (size_t{1} << 22) : (size_t{1} << 25);  // 16 MiB / 128 MiB per array
        Buffer a = alloc_floats(n), b = alloc_floats(n), c = alloc_floats(n);
        p->parallel_for(static_cast<int64_t>(n), [&](int64_t i0, int64_t i1) {  // first touch by the worker
            for (int64_t i = i0; i < i1; ++i) a.get()[i] = 0, b.get()[i] = 1, c.get()[i] = 2;
        });
        out.push_back(measure("triad bandwidth", "GB/s", "compiler", threads, reps, [&] {
            p->parallel_for(static_cast<int64_t>(n), [&](int64_t i0, int64_t i1) {
                float* __restrict pa = a.get();
                const float* __restrict pb = b.get();
                const float* __restrict pc = c.get();
                for (int64_t i = i0; i < i1; ++i) pa[i] = pb[i] + 3.0f * pc[i];
            });
            return 3.0 * 4.0 * static_cast<double>(n);
        }));
        const int64_t iters = quick ? 200000 : 2000000;
        auto per_thread = [&](double (*loop)(int64_t)) {
            return [p, loop, iters] {
                std::vector<double> flops(static_cast<size_t>(p->size()));
                p->parallel_for(p->size(), [&](int64_t t0, int64_t t1) {
                    for (int64_t t = t0; t < t1; ++t) flops[static_cast<size_t>(t)] = loop(iters);
                });
                double total = 0;
                for (double f : flops) total += f;
                return total;
            };
        };
        if (isa >= Isa::avx512) out.push_back(measure("fp32 fma", "GFLOP/s", "avx512", threads, reps, per_thread(fma_f32_loop_avx512)));
        if (isa >= Isa::avx2) out.push_back(measure("fp32 fma", "GFLOP/s", "avx2", threads, reps, per_thread(fma_f32_loop_avx2)));
        if (isa >= Isa::avx512_bf16)
            out.push_back(measure("bf16 dot", "GFLOP/s", "avx512_bf16", threads, reps, per_thread(dot_bf16_loop_avx512_bf16)));
        if (isa >= Isa::amx_bf16) out.push_back(measure("bf16 amx", "GFLOP/s", "amx_bf16", threads, reps, per_thread(dot_bf16_loop_amx)));
    }
    return out;
}

void keep_best(std::vector<Ceiling>& into, const std::vector<Ceiling>& again) {
    for (Ceiling& c : into)
        for (const Ceiling& a : again)
            if (a.name == c.name && a.isa == c.isa && a.threads == c.threads && a.value > c.value) c = a;
}

}  // namespace sieve::bench

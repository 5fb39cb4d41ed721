// Kernel lab: the Lightning Indexer scores of the cpu backend at long context, at every ISA level,
// against the compute ceiling measured in this process (DESIGN.md: ratios, not absolute times):
//   * DeepSeek-V4 CSA: 64 heads × 128 dims, 32768 fp8_row_scale keys (128K context / 4), bf16 q: 1 decode
//     token, 4 decode tokens of 4 requests, a 512-token prefill chunk; plus the exact profile (f32 q and
//     keys) for one decode token;
//   * DSA: 64 (V3.2) and 32 (Hy4) heads × 128 dims, 131072 fp8_row_scale keys, e4m3 q, 1 decode token;
//   * QSA: 4 heads × 128 dims, no head weights, 32768 bf16 keys, bf16 q: 1 decode token, a 512-token chunk;
// all through the one op, ops/indexer_scores.h.
// Flops = 2 · heads · dim · keys · tokens. Ceilings: vdpbf16ps (avx512_bf16) and fp32 FMA (avx512, avx2)
// throughput of one core × the pool's threads, measured with independent accumulator chains.
// Old vs new: `--save FILE` writes the medians, `--baseline FILE` prints them next to this run's
// (build the lab once against the old sources with -DSIEVE_DEV_SRC=<old tree>/src; the op's params must
// be the same there).
// Usage: bench_indexer [--save FILE] [--baseline FILE] [--reps N] [--scatter-keys]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <immintrin.h>

#include "sieve/backends/backend.h"
#include "core/cpu_features.h"
#include "sieve/core/dtype.h"
#include "core/thread_pool.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/cache_view.h"
#include "sieve/ops/indexer_scores.h"

using namespace sieve;

namespace {

bool g_scatter_keys = false;  // --scatter-keys: every key in a block of its own, the blocks in a random order

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Median wall seconds per call of fn over at least `reps` calls and min_seconds (after one warm-up call),
// and the median process CPU seconds of the same calls: on a machine shared with other jobs, flops per CPU
// second (the pool's workers sleep while idle) still compares with a one-core ceiling.
struct Timing {
    double wall, cpu;
};
Timing time_call(const std::function<void()>& fn, int reps, double min_seconds = 0.5) {
    fn();
    std::vector<double> t, c;
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(t.size()) < reps ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < min_seconds) {
        const auto a = std::chrono::steady_clock::now();
        const double c0 = cpu_seconds();
        fn();
        c.push_back(cpu_seconds() - c0);
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    std::sort(c.begin(), c.end());
    return {t[t.size() / 2], c[c.size() / 2]};
}

// ---- ceilings: one core's throughput, 16 independent chains (latency hidden), per thread CPU second ----

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

__attribute__((target("avx512f,avx512bf16"))) double dpbf16_gflops_one_core() {
    constexpr int64_t kIters = 20'000'000 / 16;
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const __m512i x = _mm512_set1_epi32(0x3f803f80), y = _mm512_set1_epi32(0x3c003c00);  // bf16 pairs (1, 1), (2^-7, 2^-7)
    const double t0 = thread_cpu_seconds();
    for (int64_t i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm512_dpbf16_ps(a, (__m512bh)x, (__m512bh)y);
    const double s = thread_cpu_seconds() - t0;
    float sink = 0;
    alignas(64) float l[16];
    for (auto& a : acc) {
        _mm512_store_ps(l, a);
        for (float v : l) sink += v;
    }
    if (sink == 1.0f) std::printf(" ");
    return static_cast<double>(kIters) * 16 * 64 / s / 1e9;  // 16 lanes × 2 pairs × 2 flops
}

__attribute__((target("avx512f"))) double fma512_gflops_one_core() {
    constexpr int64_t kIters = 20'000'000 / 16;
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-7f);
    const double t0 = thread_cpu_seconds();
    for (int64_t i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
    const double s = thread_cpu_seconds() - t0;
    float sink = 0;
    alignas(64) float l[16];
    for (auto& a : acc) {
        _mm512_store_ps(l, a);
        for (float v : l) sink += v;
    }
    if (sink == 1.0f) std::printf(" ");
    return static_cast<double>(kIters) * 16 * 32 / s / 1e9;
}

__attribute__((target("avx2,fma"))) double fma256_gflops_one_core() {
    constexpr int64_t kIters = 20'000'000 / 12;
    __m256 acc[12];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-7f);
    const double t0 = thread_cpu_seconds();
    for (int64_t i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
    const double s = thread_cpu_seconds() - t0;
    float sink = 0;
    alignas(32) float l[8];
    for (auto& a : acc) {
        _mm256_store_ps(l, a);
        for (float v : l) sink += v;
    }
    if (sink == 1.0f) std::printf(" ");
    return static_cast<double>(kIters) * 12 * 16 / s / 1e9;
}

template <typename F>
double best_of(F f) {
    double b = 0;
    for (int i = 0; i < 3; ++i) b = std::max(b, f());
    return b;
}

// ---- buffers ------------------------------------------------------------------------------------------

struct Buf {
    std::unique_ptr<uint8_t, decltype(&std::free)> p{nullptr, &std::free};
    size_t bytes = 0;
    explicit Buf(size_t n = 0) : bytes(n) {
        if (n) p.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
        if (n) std::memset(p.get(), 0, n);
    }
    template <typename T> T* as() { return reinterpret_cast<T*>(p.get()); }
};

std::unique_ptr<Backend> backend(const std::string& spec) {
    auto b = make_backend(spec);
    if (!b.has_value()) return nullptr;
    return std::move(b).value();
}

void check(const Status& s, const char* what) {
    if (!s.is_ok()) {
        std::fprintf(stderr, "%s: %s\n", what, s.to_string().c_str());
        std::exit(1);
    }
}

// One timed configuration: run(backend) and its flops.
struct Case {
    std::string name;
    double flops;
    std::function<void(Backend&)> run;
};

// ---- one setup for every family's shape ----------------------------------------------------------------

// `lists` requests of `keys` indexer keys each in a paged cache whose blocks are in a random order (the pages
// of a long context are scattered in the pool, the entries of one page consecutive; --scatter-keys: blocks
// of one entry), `tokens` tokens spread over the requests, each scoring every key of its request.
struct IndexerSetup {
    int64_t heads = 64, dim = 128, keys = 32768, lists = 1, tokens = 1;
    CacheRecordFormat fmt = CacheRecordFormat::fp8_row_scale;
    DType q_type = DType::bf16;
    bool weighted = true;  // head weights (V4, DSA); QSA has none
    float weight_scale = 1.0f;
    Buf cache, q, q_scale, w, table, token_request, n_keys, scores, ws;
    CacheView view;
    int64_t n_slots = 0, table_stride = 0;
    IndexerScoresParams params() {
        IndexerScoresParams p;
        p.q = q.as<void>();
        p.q_type = q_type;
        p.q_token_stride = heads * dim;
        p.q_head_stride = dim;
        if (q_type == DType::f8_e4m3) {
            p.q_scale = q_scale.as<float>();
            p.q_scale_token_stride = heads;
        }
        p.weights = weighted ? w.as<float>() : nullptr;
        p.weights_token_stride = heads;
        p.weight_scale = weight_scale;
        p.keys = view;
        p.key_format = fmt;
        p.n_slots = n_slots;
        p.tables = {table.as<int32_t>(), token_request.as<int32_t>(), lists, table_stride};
        p.n_keys = n_keys.as<int32_t>();
        p.scores = scores.as<float>();
        p.scores_row_stride = keys;
        p.n_tokens = tokens;
        p.n_heads = heads;
        p.head_dim = dim;
        p.n_cols = keys;
        return p;
    }
    double flops() const { return 2.0 * static_cast<double>(heads * dim * keys * tokens); }
};

std::unique_ptr<IndexerSetup> indexer_setup(const IndexerSetup& shape, Backend& ref) {
    auto s = std::make_unique<IndexerSetup>();
    s->heads = shape.heads;
    s->dim = shape.dim;
    s->keys = shape.keys;
    s->lists = shape.lists;
    s->tokens = shape.tokens;
    s->fmt = shape.fmt;
    s->q_type = shape.q_type;
    s->weighted = shape.weighted;
    s->weight_scale = shape.weight_scale;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const CacheRecordLayout kl{s->fmt, s->dim, 0};
    const int64_t bs = g_scatter_keys ? 1 : 64, per_list = (s->keys + bs - 1) / bs, blocks = s->lists * per_list;
    const int64_t block_bytes = (bs * kl.entry_bytes() + 63) / 64 * 64;
    s->cache = Buf(static_cast<size_t>(blocks * block_bytes));
    s->view = CacheView{s->cache.as<uint8_t>(), block_bytes, bs, kl.entry_bytes()};
    s->n_slots = blocks * bs;
    s->table_stride = per_list;
    std::vector<int32_t> perm(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) perm[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    std::shuffle(perm.begin(), perm.end(), rng);
    s->table = Buf(static_cast<size_t>(blocks) * 4);
    std::memcpy(s->table.as<int32_t>(), perm.data(), static_cast<size_t>(blocks) * 4);
    // Every key of every request through the store op, at its slot under the tables.
    const int64_t n = s->lists * s->keys;
    std::vector<float> x(static_cast<size_t>(n * s->dim));
    for (float& v : x) v = nd(rng);
    std::vector<int32_t> slots(static_cast<size_t>(n));
    for (int64_t l = 0; l < s->lists; ++l)
        for (int64_t j = 0; j < s->keys; ++j)
            slots[static_cast<size_t>(l * s->keys + j)] = static_cast<int32_t>(perm[static_cast<size_t>(l * per_list + j / bs)] * bs + j % bs);
    CacheStoreParams sp;
    sp.x = x.data();
    sp.slots = slots.data();
    sp.cache = s->view;
    sp.layout = kl;
    sp.n_slots = s->n_slots;
    sp.n_rows = n;
    sp.dim = s->dim;
    sp.x_row_stride = s->dim;
    check(ref.cache_store(sp), "cache_store");
    const int64_t qn = s->tokens * s->heads * s->dim;
    s->q = Buf(static_cast<size_t>(qn) * 4);
    for (int64_t i = 0; i < qn; ++i) {
        if (s->q_type == DType::bf16)
            s->q.as<uint16_t>()[i] = f32_to_bf16(nd(rng));
        else if (s->q_type == DType::f8_e4m3)
            s->q.as<uint8_t>()[i] = f32_to_fp8_e4m3(std::clamp(nd(rng) * 64.0f, -448.0f, 448.0f));
        else
            s->q.as<float>()[i] = nd(rng);
    }
    s->q_scale = Buf(static_cast<size_t>(s->tokens * s->heads) * 4);
    s->w = Buf(static_cast<size_t>(s->tokens * s->heads) * 4);
    for (int64_t i = 0; i < s->tokens * s->heads; ++i) {
        s->q_scale.as<float>()[i] = 1.0f / 64.0f;
        s->w.as<float>()[i] = 0.1f * nd(rng);
    }
    s->token_request = Buf(static_cast<size_t>(s->tokens) * 4);
    s->n_keys = Buf(static_cast<size_t>(s->tokens) * 4);
    for (int64_t t = 0; t < s->tokens; ++t) {
        s->token_request.as<int32_t>()[t] = static_cast<int32_t>(t % s->lists);
        s->n_keys.as<int32_t>()[t] = static_cast<int32_t>(s->keys);
    }
    s->scores = Buf(static_cast<size_t>(s->tokens * s->keys) * 4);
    return s;
}

std::map<std::string, double> read_baseline(const std::string& path) {
    std::map<std::string, double> m;
    FILE* f = std::fopen(path.c_str(), "r");
    if (!f) return m;
    char key[256];
    double v;
    while (std::fscanf(f, "%255s %lf", key, &v) == 2) m[key] = v;
    std::fclose(f);
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    std::string save, baseline_path;
    int reps = 7;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--save" && i + 1 < argc) save = argv[++i];
        else if (a == "--baseline" && i + 1 < argc) baseline_path = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (a == "--scatter-keys") g_scatter_keys = true;
        else {
            std::printf("usage: bench_indexer [--save FILE] [--baseline FILE] [--reps N] [--scatter-keys]\n");
            return a == "--help" ? 0 : 1;
        }
    }
    const auto baseline = read_baseline(baseline_path);
    const int threads = ThreadPool::global().size();
    const Isa hw = active_isa();
    const double bf16_peak = hw >= Isa::avx512_bf16 ? best_of(dpbf16_gflops_one_core) : 0.0;
    const double fma512_peak = hw >= Isa::avx512 ? best_of(fma512_gflops_one_core) : 0.0;
    const double fma256_peak = hw >= Isa::avx2 ? best_of(fma256_gflops_one_core) : 0.0;
    std::printf("threads %d; one-core ceilings: vdpbf16ps %.1f GFLOP/s, fp32 FMA zmm %.1f, ymm %.1f\n", threads, bf16_peak,
                fma512_peak, fma256_peak);

    auto ref = backend("ref");
    std::vector<Case> cases;
    struct Def {
        const char* name;
        IndexerSetup shape;
    };
    auto shape = [](int64_t heads, int64_t keys, int64_t lists, int64_t tokens, CacheRecordFormat fmt, DType qt,
                    bool weighted, float weight_scale) {
        IndexerSetup s;
        s.heads = heads;
        s.keys = keys;
        s.lists = lists;
        s.tokens = tokens;
        s.fmt = fmt;
        s.q_type = qt;
        s.weighted = weighted;
        s.weight_scale = weight_scale;
        return s;
    };
    using F = CacheRecordFormat;
    const Def defs[] = {
        {"v4_fp8_bf16q_decode1", shape(64, 32768, 1, 1, F::fp8_row_scale, DType::bf16, true, 1.0f)},
        {"v4_fp8_bf16q_decode4x4lists", shape(64, 32768, 4, 4, F::fp8_row_scale, DType::bf16, true, 1.0f)},
        {"v4_fp8_bf16q_prefill512", shape(64, 32768, 1, 512, F::fp8_row_scale, DType::bf16, true, 1.0f)},
        {"v4_f32_f32q_decode1", shape(64, 32768, 1, 1, F::f32, DType::f32, true, 1.0f)},
        // V3.2 (64 index heads) and Hy4 (32), one decode token over 128K keys.
        {"dsa_fp8_decode1", shape(64, 131072, 1, 1, F::fp8_row_scale, DType::f8_e4m3, true, 1.0f / 128.0f)},
        {"dsa_fp8_32heads_decode1", shape(32, 131072, 1, 1, F::fp8_row_scale, DType::f8_e4m3, true, 1.0f / 128.0f)},
        // QSA (4 index heads, no head weights), 128K context / 4: one decode token, a 512-token chunk.
        {"qsa_bf16_decode1", shape(4, 32768, 1, 1, F::bf16, DType::bf16, false, 1.0f / 128.0f)},
        {"qsa_bf16_prefill512", shape(4, 32768, 1, 512, F::bf16, DType::bf16, false, 1.0f / 128.0f)},
    };
    std::vector<std::unique_ptr<IndexerSetup>> setups;
    for (const Def& d : defs) {
        setups.push_back(indexer_setup(d.shape, *ref));
        IndexerSetup* s = setups.back().get();
        cases.push_back({d.name, s->flops(), [s](Backend& b) {
                             const IndexerScoresParams p = s->params();
                             const size_t need = b.indexer_scores_workspace_size(p);
                             if (s->ws.bytes < need) s->ws = Buf(need);
                             check(b.indexer_scores(p, Workspace{s->ws.as<void>(), need}), "indexer_scores");
                         }});
    }

    FILE* out = save.empty() ? nullptr : std::fopen(save.c_str(), "w");
    std::printf("\nGFLOP/s and %%ceil: per wall second against threads × the one-core ceiling measured just before the\n"
                "case; %%c/cpu: per CPU second of the process against that one-core ceiling\n");
    std::printf("%-30s %-12s %10s %9s %8s %8s %10s %8s\n", "case", "isa", "ms/call", "GFLOP/s", "%ceil", "%c/cpu", "old ms",
                "speedup");
    for (const char* isa : {"avx2", "avx512", "avx512_bf16", "amx_bf16"}) {
        auto b = backend(std::string("cpu:") + isa);
        if (!b) {
            std::printf("%-30s %-12s (not supported here)\n", "*", isa);
            continue;
        }
        const std::string is = isa;
        for (Case& c : cases) {
            // The ceiling that binds: bf16 dots where the kernel may use them (bf16/fp8 operands at
            // avx512_bf16), else fp32 FMA of the ISA's vector width. amx_bf16 is shown against the same
            // vdpbf16ps ceiling (its tiles' own peak is far above: `sieve bench` measures it).
            // The machine is shared: the ceiling is measured again right before each case, and the case
            // is compared with that (and with the start-of-run value when that is higher).
            const bool bf16_ok = (is == "avx512_bf16" || is == "amx_bf16") && c.name.find("f32") == std::string::npos;
            const double now = bf16_ok ? dpbf16_gflops_one_core() : (is == "avx2" ? fma256_gflops_one_core() : fma512_gflops_one_core());
            const double ceil1 = std::max(now, 0.5 * (bf16_ok ? bf16_peak : (is == "avx2" ? fma256_peak : fma512_peak)));
            const Timing tm = time_call([&] { c.run(*b); }, reps);
            const double s = tm.wall;
            const double gf = c.flops / s / 1e9, per_cpu = 100.0 * c.flops / tm.cpu / 1e9 / ceil1;
            const std::string key = c.name + "/" + is;
            const auto it = baseline.find(key);
            if (it != baseline.end())
                std::printf("%-30s %-12s %10.3f %9.1f %7.1f%% %7.1f%% %10.3f %7.2fx\n", c.name.c_str(), isa, s * 1e3, gf,
                            100.0 * gf / (ceil1 * threads), per_cpu, it->second * 1e3, it->second / s);
            else
                std::printf("%-30s %-12s %10.3f %9.1f %7.1f%% %7.1f%%\n", c.name.c_str(), isa, s * 1e3, gf,
                            100.0 * gf / (ceil1 * threads), per_cpu);
            if (out) std::fprintf(out, "%s %.9f\n", key.c_str(), s);
        }
    }
    if (out) std::fclose(out);
    return 0;
}

// Kernel lab: the sparse attention of the cpu backend (ops/sparse_attention.h) in the layouts of both families
// at their real shapes, at every ISA level,
// against the fp32 FMA ceiling measured in this process (DESIGN.md: ratios, not absolute times):
//   * DeepSeek-V4's MQA layout (deepseek_v4.md §3.8), V4-Flash deployed profile: 64 heads,
//     one shared K = V row of d = 512 (448 e4m3 dims with UE8M0 scales + 64 bf16 rope dims: fp8_model1
//     records), bf16 q and out; per token 128 window rows + 512 compressed rows (CSA top-k), both caches
//     paged in 64-row blocks placed in a random order; 1 decode token, 4 decode tokens (4 requests), a
//     512-token prefill chunk; and the exact profile (f32 rows, q, out) for one decode token.
//   * DSA's MLA layout (dsa_mla.md §2.5): 128 heads, kv_lora 512 + rope 64, fp8_v32, 2048 selected
//     rows, 1 decode token (the tiles are shared with the V4 kernel: this shows it did not slow down).
// Flops per row and head: 2·Dqk for the logits + 2·Dv for P·V (V4: 2·512 + 2·512; DSA: 2·576 + 2·512).
// Ceilings: fp32 FMA throughput of one core (zmm for avx512, ymm for avx2) × the pool's threads, measured
// with independent accumulator chains right before each case (the machine may be shared).
// %c/cpu uses the process CPU clock, which accounts the pool workers' running time only at scheduler events:
// for calls under a few ms (decode) it can undercount (values over 100 %); the prefill figure is reliable.
// Old vs new: `--save FILE` writes the medians, `--baseline FILE` prints them next to this run's (build the
// lab once against the old sources with -DSIEVE_DEV_SRC=<old tree>/src).
// Usage: bench_attention [--save FILE] [--baseline FILE] [--reps N] [--isa LIST] [--only SUBSTRING]
#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "sieve/ops/sparse_attention.h"

using namespace sieve;

namespace {

double cpu_seconds(clockid_t id) {
    timespec ts;
    clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Median wall seconds per call over at least `reps` calls and min_seconds (after one warm-up call), and
// the median process CPU seconds of the same calls (flops per CPU second compare with a one-core ceiling
// even when another job shares the machine; idle pool workers sleep).
struct Timing {
    double wall, cpu, wall_min, wall_max;
};
Timing time_call(const std::function<void()>& fn, int reps, double min_seconds) {
    fn();
    std::vector<double> t, c;
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(t.size()) < reps ||
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < min_seconds) {
        const auto a = std::chrono::steady_clock::now();
        const double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
        fn();
        c.push_back(cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0);
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    std::sort(c.begin(), c.end());
    return {t[t.size() / 2], c[c.size() / 2], t.front(), t.back()};
}

// ---- ceilings: one core's fp32 FMA throughput, independent chains (latency hidden), per thread CPU second ----

__attribute__((target("avx512f"))) double fma512_gflops_one_core() {
    constexpr int64_t kIters = 20'000'000 / 16;
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-7f);
    const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
    const double s = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    alignas(64) float l[16];
    float sink = 0;
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
    const double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t i = 0; i < kIters; ++i)
        for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
    const double s = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    alignas(32) float l[8];
    float sink = 0;
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

// Slot of logical entry i of a paged cache whose 64-entry blocks were placed in the order `perm`.
int32_t paged(const std::vector<int32_t>& perm, int64_t i, int64_t bs) {
    return static_cast<int32_t>(perm[static_cast<size_t>(i / bs)] * bs + i % bs);
}

std::vector<int32_t> block_perm(int64_t blocks, std::mt19937& rng) {
    std::vector<int32_t> perm(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) perm[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    std::shuffle(perm.begin(), perm.end(), rng);
    return perm;
}

struct Case {
    std::string name;
    double flops;
    int reps;
    std::function<void(Backend&)> run;
};

// ---- DeepSeek-V4 sparse MQA ----------------------------------------------------------------------------

struct MqaSetup {
    int64_t heads = 64, dim = 512, rope = 64, n_window = 128, n_compressed = 512, tokens = 1;
    int64_t compressed_entries = 32768;  // a 128K context at CSA ratio 4 (§3.5)
    CacheRecordFormat fmt = CacheRecordFormat::fp8_model1;
    DType io = DType::bf16;
    Buf wcache, ccache, q, out, wslots, cslots, sink, ws;
    CacheView wview, cview;
    int64_t w_slots = 0, c_slots = 0;  // the caches' slots (whole 64-entry blocks)
    SparseAttentionParams params() {
        SparseAttentionParams p;
        p.q = q.as<void>();
        p.q_type = io;
        p.q_token_stride = heads * dim;
        p.q_head_stride = dim;
        p.main.cache = wview;  // main = the window, extra = the compressed entries (ops/sparse_attention.h)
        p.main.format = fmt;
        p.main.n_slots = w_slots;
        p.main.slots = wslots.as<int32_t>();
        p.main.width = n_window;
        p.main.slots_stride = n_window;
        p.extra.cache = cview;
        p.extra.format = fmt;
        p.extra.n_slots = c_slots;
        p.extra.slots = cslots.as<int32_t>();
        p.extra.width = n_compressed;
        p.extra.slots_stride = n_compressed;
        p.sink = sink.as<float>();
        p.scale = 1.0f / std::sqrt(static_cast<float>(dim));  // §1.2: head_dim^-0.5
        p.out = out.as<void>();
        p.out_type = io;
        p.out_token_stride = heads * dim;
        p.out_head_stride = dim;
        p.n_tokens = tokens;
        p.n_heads = heads;
        p.qk_dim = p.v_dim = dim;
        p.rope_dim = rope;
        // The deployed profile's weights (bf16 P·V) with its bf16 rows; the exact profile's fp32 ones.
        p.math = io == DType::bf16 ? AttentionMath::bf16 : AttentionMath::f32;
        return p;
    }
};

// A cache of n entries filled with random rows through ref cache_store, blocks in a random order (`perm`).
CacheView fill_cache(Backend& ref, const CacheRecordLayout& l, int64_t n, const std::vector<int32_t>& perm, std::mt19937& rng,
                     Buf& mem) {
    const int64_t bs = 64, blocks = static_cast<int64_t>(perm.size());
    const int64_t block_bytes = (bs * l.entry_bytes() + 63) / 64 * 64;
    mem = Buf(static_cast<size_t>(blocks * block_bytes));
    const CacheView v{mem.as<uint8_t>(), block_bytes, bs, l.entry_bytes()};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * l.dim));
    for (float& e : x) e = nd(rng);
    std::vector<int32_t> slots(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) slots[static_cast<size_t>(i)] = paged(perm, i, bs);
    CacheStoreParams sp;
    sp.x = x.data();
    sp.slots = slots.data();
    sp.cache = v;
    sp.layout = l;
    sp.n_slots = blocks * bs;
    sp.n_rows = n;
    sp.dim = l.dim;
    sp.x_row_stride = l.dim;
    sp.round_bf16 = true;  // as DeepSeek-V4 stores its rows
    check(ref.cache_store(sp), "cache_store");
    return v;
}

// Token t (of `tokens`, one request per token when `requests`, else consecutive positions of one request)
// reads window entries [pos − 127, pos] and 512 distinct compressed entries picked at random.
std::unique_ptr<MqaSetup> mqa_setup(int64_t tokens, bool requests, CacheRecordFormat fmt, DType io, Backend& ref) {
    auto s = std::make_unique<MqaSetup>();
    s->tokens = tokens;
    s->fmt = fmt;
    s->io = io;
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const CacheRecordLayout l{fmt, s->dim, fmt == CacheRecordFormat::fp8_model1 ? s->rope : 0};
    const int64_t bs = 64;
    // Window entries: one window per request (requests) or one sliding window over the chunk's positions.
    const int64_t w_entries = requests ? tokens * s->n_window : tokens + s->n_window;
    const std::vector<int32_t> wperm = block_perm((w_entries + bs - 1) / bs, rng);
    s->wview = fill_cache(ref, l, w_entries, wperm, rng, s->wcache);
    s->w_slots = static_cast<int64_t>(wperm.size()) * bs;
    const int64_t c_entries = s->compressed_entries * (requests ? tokens : 1);
    const std::vector<int32_t> cperm = block_perm((c_entries + bs - 1) / bs, rng);
    s->cview = fill_cache(ref, l, c_entries, cperm, rng, s->ccache);
    s->c_slots = static_cast<int64_t>(cperm.size()) * bs;
    s->wslots = Buf(static_cast<size_t>(tokens * s->n_window) * 4);
    s->cslots = Buf(static_cast<size_t>(tokens * s->n_compressed) * 4);
    std::vector<int32_t> pick(static_cast<size_t>(s->compressed_entries));
    for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t j = 0; j < s->n_window; ++j) {
            const int64_t e = requests ? t * s->n_window + j : t + j;
            s->wslots.as<int32_t>()[t * s->n_window + j] = paged(wperm, e, bs);
        }
        for (int64_t i = 0; i < s->compressed_entries; ++i) pick[static_cast<size_t>(i)] = static_cast<int32_t>(i);
        std::shuffle(pick.begin(), pick.end(), rng);
        std::sort(pick.begin(), pick.begin() + s->n_compressed);  // the indexer's top-k, in position order
        for (int64_t j = 0; j < s->n_compressed; ++j) {
            const int64_t e = (requests ? t * s->compressed_entries : 0) + pick[static_cast<size_t>(j)];
            s->cslots.as<int32_t>()[t * s->n_compressed + j] = paged(cperm, e, bs);
        }
    }
    const int64_t qn = tokens * s->heads * s->dim;
    s->q = Buf(static_cast<size_t>(qn) * 4);
    s->out = Buf(static_cast<size_t>(qn) * 4);
    for (int64_t i = 0; i < qn; ++i) {
        if (io == DType::bf16)
            s->q.as<uint16_t>()[i] = f32_to_bf16(nd(rng));
        else
            s->q.as<float>()[i] = nd(rng);
    }
    s->sink = Buf(static_cast<size_t>(s->heads) * 4);
    for (int64_t h = 0; h < s->heads; ++h) s->sink.as<float>()[h] = nd(rng);
    return s;
}

// ---- DSA sparse MLA ------------------------------------------------------------------------------------

struct MlaSetup {
    int64_t heads = 128, r = 512, dr = 64, topk = 2048, tokens = 1, entries = 32768;
    Buf cache, q, out, slots, ws;
    CacheView view;
    SparseAttentionParams params() {
        SparseAttentionParams p;
        p.q = q.as<void>();
        p.q_type = DType::bf16;
        p.q_token_stride = heads * (r + dr);
        p.q_head_stride = r + dr;
        p.main.cache = view;
        p.main.format = CacheRecordFormat::fp8_v32;
        p.main.n_slots = entries;
        p.main.slots = slots.as<int32_t>();
        p.main.width = topk;
        p.main.slots_stride = topk;
        p.out = out.as<void>();
        p.out_type = DType::bf16;
        p.out_token_stride = heads * r;
        p.out_head_stride = r;
        p.scale = 1.0f / std::sqrt(static_cast<float>(r + dr));
        p.n_tokens = tokens;
        p.n_heads = heads;
        p.qk_dim = r + dr;
        p.v_dim = r;
        p.rope_dim = dr;
        p.math = AttentionMath::bf16;  // the deployed profile's (dsa_mla.md §3.4)
        return p;
    }
};

std::unique_ptr<MlaSetup> mla_setup(Backend& ref) {
    auto s = std::make_unique<MlaSetup>();
    std::mt19937 rng(23);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t bs = 64, blocks = s->entries / bs;
    const CacheRecordLayout layout{CacheRecordFormat::fp8_v32, s->r + s->dr, s->dr};
    const int64_t entry = layout.entry_bytes();
    const int64_t block_bytes = (bs * entry + 63) / 64 * 64;
    s->cache = Buf(static_cast<size_t>(blocks * block_bytes));
    s->view = CacheView{s->cache.as<uint8_t>(), block_bytes, bs, entry};
    std::vector<float> rows(static_cast<size_t>(s->entries * (s->r + s->dr)));  // [c | kr]
    for (float& v : rows) v = nd(rng);
    std::vector<int32_t> wslots(static_cast<size_t>(s->entries));
    for (int64_t i = 0; i < s->entries; ++i) wslots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    CacheStoreParams wp;
    wp.x = rows.data();
    wp.slots = wslots.data();
    wp.cache = s->view;
    wp.layout = layout;
    wp.n_slots = s->entries;
    wp.n_rows = s->entries;
    wp.dim = s->r + s->dr;
    wp.x_row_stride = s->r + s->dr;
    check(ref.cache_store(wp), "cache_store");
    // The selection: 2048 distinct entries of the (paged, shuffled-block) context.
    const std::vector<int32_t> perm = block_perm(blocks, rng);
    std::vector<int32_t> pick(static_cast<size_t>(s->entries));
    for (int64_t i = 0; i < s->entries; ++i) pick[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(pick.begin(), pick.end(), rng);
    std::sort(pick.begin(), pick.begin() + s->topk);
    s->slots = Buf(static_cast<size_t>(s->topk) * 4);
    for (int64_t j = 0; j < s->topk; ++j) s->slots.as<int32_t>()[j] = paged(perm, pick[static_cast<size_t>(j)], bs);
    const int64_t qn = s->tokens * s->heads * (s->r + s->dr);
    s->q = Buf(static_cast<size_t>(qn) * 2);
    for (int64_t i = 0; i < qn; ++i) s->q.as<uint16_t>()[i] = f32_to_bf16(0.1f * nd(rng));
    s->out = Buf(static_cast<size_t>(s->tokens * s->heads * s->r) * 2);
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

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        const size_t e = s.find(',', b);
        out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) break;
        b = e + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string save, baseline_path, only, isas = "avx2,avx512";
    int reps = 7;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--save" && i + 1 < argc) save = argv[++i];
        else if (a == "--baseline" && i + 1 < argc) baseline_path = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (a == "--isa" && i + 1 < argc) isas = argv[++i];
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else {
            std::printf("usage: bench_attention [--save FILE] [--baseline FILE] [--reps N] [--isa avx2,avx512,avx512_bf16,amx_bf16] "
                        "[--only SUBSTRING]\n");
            return a == "--help" ? 0 : 1;
        }
    }
    const auto baseline = read_baseline(baseline_path);
    const int threads = ThreadPool::global().size();
    const Isa hw = active_isa();
    const double fma512_peak = hw >= Isa::avx512 ? best_of(fma512_gflops_one_core) : 0.0;
    const double fma256_peak = hw >= Isa::avx2 ? best_of(fma256_gflops_one_core) : 0.0;
    std::printf("threads %d; one-core fp32 FMA ceilings: zmm %.1f GFLOP/s, ymm %.1f\n", threads, fma512_peak, fma256_peak);

    auto ref = backend("ref");
    std::vector<Case> cases;
    struct MqaDef {
        const char* name;
        int64_t tokens;
        bool requests;
        CacheRecordFormat fmt;
        DType io;
        int reps;
    };
    const MqaDef defs[] = {
        {"v4_mqa_fp8_bf16_decode1", 1, true, CacheRecordFormat::fp8_model1, DType::bf16, reps},
        {"v4_mqa_fp8_bf16_decode4x4req", 4, true, CacheRecordFormat::fp8_model1, DType::bf16, reps},
        {"v4_mqa_fp8_bf16_decode16x16req", 16, true, CacheRecordFormat::fp8_model1, DType::bf16, reps},
        {"v4_mqa_fp8_bf16_prefill512", 512, false, CacheRecordFormat::fp8_model1, DType::bf16, std::max(1, reps / 2)},
        {"v4_mqa_f32_f32_decode1", 1, true, CacheRecordFormat::f32, DType::f32, reps},
    };
    std::vector<std::unique_ptr<MqaSetup>> mqas;
    for (const MqaDef& d : defs) {
        if (!only.empty() && std::string(d.name).find(only) == std::string::npos) continue;
        mqas.push_back(mqa_setup(d.tokens, d.requests, d.fmt, d.io, *ref));
        MqaSetup* s = mqas.back().get();
        const double flops = static_cast<double>(s->tokens * s->heads * (s->n_window + s->n_compressed)) * (2.0 * s->dim + 2.0 * s->dim);
        cases.push_back({d.name, flops, d.reps, [s](Backend& b) {
                             const SparseAttentionParams p = s->params();
                             const size_t need = b.sparse_attention_workspace_size(p);
                             if (s->ws.bytes < need) s->ws = Buf(need);
                             check(b.sparse_attention(p, Workspace{s->ws.as<void>(), need}), "sparse_attention");
                         }});
    }
    std::unique_ptr<MlaSetup> mla;
    if (only.empty() || std::string("dsa_mla_fp8_bf16_decode1").find(only) != std::string::npos) {
        mla = mla_setup(*ref);
        MlaSetup* s = mla.get();
        const double flops = static_cast<double>(s->tokens * s->heads * s->topk) * (2.0 * (s->r + s->dr) + 2.0 * s->r);
        cases.push_back({"dsa_mla_fp8_bf16_decode1", flops, reps, [s](Backend& b) {
                             const SparseAttentionParams p = s->params();
                             const size_t need = b.sparse_attention_workspace_size(p);
                             if (s->ws.bytes < need) s->ws = Buf(need);
                             check(b.sparse_attention(p, Workspace{s->ws.as<void>(), need}), "sparse_attention");
                         }});
    }

    FILE* out = save.empty() ? nullptr : std::fopen(save.c_str(), "w");
    std::printf("\nGFLOP/s and %%ceil: per wall second against threads × the one-core ceiling measured just before the\n"
                "case; %%c/cpu: per CPU second of the process against that one-core ceiling; spread: (max − min) / median;\n"
                "speedup: old / new wall median; cpu-s gain: old / new median process CPU seconds per call\n");
    std::printf("%-30s %-12s %10s %9s %7s %7s %7s %10s %8s %10s\n", "case", "isa", "ms/call", "GFLOP/s", "%ceil", "%c/cpu",
                "spread", "old ms", "speedup", "cpu-s gain");
    for (const std::string& is : split(isas)) {
        auto b = backend("cpu:" + is);
        if (!b) {
            std::printf("%-30s %-12s (not supported here)\n", "*", is.c_str());
            continue;
        }
        for (Case& c : cases) {
            const bool ymm = is == "avx2";
            const double now = ymm ? fma256_gflops_one_core() : fma512_gflops_one_core();
            const double ceil1 = std::max(now, 0.5 * (ymm ? fma256_peak : fma512_peak));
            const Timing tm = time_call([&] { c.run(*b); }, c.reps, 0.5);
            const double s = tm.wall;
            const double gf = c.flops / s / 1e9, per_cpu = 100.0 * c.flops / tm.cpu / 1e9 / ceil1;
            const double spread = 100.0 * (tm.wall_max - tm.wall_min) / s;
            const std::string key = c.name + "/" + is;
            const auto it = baseline.find(key), it_cpu = baseline.find(key + "/cpu");
            std::printf("%-30s %-12s %10.3f %9.1f %6.1f%% %6.1f%% %6.0f%%", c.name.c_str(), is.c_str(), s * 1e3, gf,
                        100.0 * gf / (ceil1 * threads), per_cpu, spread);
            if (it != baseline.end()) std::printf(" %10.3f %7.2fx", it->second * 1e3, it->second / s);
            if (it_cpu != baseline.end()) std::printf(" %9.2fx", it_cpu->second / tm.cpu);
            std::printf("\n");
            std::fflush(stdout);
            if (out) std::fprintf(out, "%s %.9f\n%s/cpu %.9f\n", key.c_str(), s, key.c_str(), tm.cpu);
        }
    }
    if (out) std::fclose(out);
    return 0;
}

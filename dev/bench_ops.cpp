// Kernel lab: times the cpu backend's ops at the shapes of the three families and reports them
// as ratios against ceilings and baselines measured in the same process (DESIGN.md: absolute
// times alone prove nothing on a shared machine):
//   * memory-bound ops (decode GEMV, norms): bytes moved / time against a read-bandwidth probe;
//   * linear: own kernels against oneDNN on the same shape;
//   * top-k: against std::nth_element + sort of the same rows.
// Usage: bench_ops [linear|topk|rows|all] [--shape TEXT]... [--m 1,2,3] [--backend TEXT]...
//   --shape / --backend keep the linear shapes / backend specs whose name contains TEXT (any of them);
//   --m replaces the linear batch sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "sieve/core/tensor.h"
#include "core/thread_pool.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/topk.h"

using namespace sieve;

namespace {

// Median seconds per call of fn, repeated for at least min_seconds (after one warm-up call).
double time_call(const std::function<void()>& fn, double min_seconds = 0.3) {
    fn();
    std::vector<double> t;
    const auto start = std::chrono::steady_clock::now();
    while (t.size() < 5 || std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < min_seconds) {
        const auto a = std::chrono::steady_clock::now();
        fn();
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Read bandwidth of the machine with the global pool's threads: each sums its share of 512 MiB.
double read_bandwidth_gbs() {
    const size_t n = size_t{512} << 20 >> 3;
    std::vector<uint64_t> buf(n, 1);
    std::vector<uint64_t> sums(64, 0);
    ThreadPool& pool = ThreadPool::global();
    const double s = time_call([&] {
        pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
            uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            for (int64_t i = b; i + 4 <= e; i += 4) {
                a0 += buf[static_cast<size_t>(i)];
                a1 += buf[static_cast<size_t>(i) + 1];
                a2 += buf[static_cast<size_t>(i) + 2];
                a3 += buf[static_cast<size_t>(i) + 3];
            }
            sums[static_cast<size_t>(b * 63 / static_cast<int64_t>(n))] += a0 + a1 + a2 + a3;
        });
    }, 1.0);
    return static_cast<double>(n * 8) / s / 1e9;
}

std::unique_ptr<Backend> backend(const std::string& spec) {
    auto b = make_backend(spec);
    if (!b.has_value()) {
        std::fprintf(stderr, "%s: %s\n", spec.c_str(), b.status().to_string().c_str());
        std::exit(1);
    }
    return std::move(b).value();
}

constexpr size_t kColdWeightBytes = size_t{1} << 30;  // well past any last-level cache of a CPU socket

struct LinearShape {
    const char* name;
    int64_t n, k;
    DType w;
};

struct LinearFilter {
    std::vector<std::string> shapes, backends;
    std::vector<int64_t> batches;
};

bool any_contains(const std::vector<std::string>& texts, const std::string& name) {
    if (texts.empty()) return true;
    for (const std::string& t : texts)
        if (name.find(t) != std::string::npos) return true;
    return false;
}

void bench_linear(double bw, const LinearFilter& filter) {
    std::printf("\n== linear (y = x·Wᵀ), x/y bf16, LinearMath::bf16 unless noted; bandwidth ceiling %.1f GB/s\n", bw);
    std::printf("%-34s %6s %-26s %10s %9s %8s %8s\n", "shape", "m", "backend", "us/call", "GB/s", "%bw", "GFLOP/s");
    std::mt19937_64 rng(1);
    const std::vector<LinearShape> shapes = {
        {"dsv4 wq_a fp8 [1024, 4096]", 1024, 4096, DType::f8_e4m3},
        {"dsv4 wq_b fp8 [32768, 1024]", 32768, 1024, DType::f8_e4m3},
        {"dsv4 wo_b fp8 [4096, 8192]", 4096, 8192, DType::f8_e4m3},
        {"bf16 [4096, 4096]", 4096, 4096, DType::bf16},
        {"f32 [4096, 4096] (f32 math)", 4096, 4096, DType::f32},
    };
    std::vector<std::string> specs = {fmt::format("cpu:{}:nodnnl", isa_name(active_isa())), "cpu:avx2:nodnnl"};
    // the register kernels of the level below, the baseline of the AMX tile kernels
    if (active_isa() == Isa::amx_bf16) specs.insert(specs.begin() + 1, "cpu:avx512_bf16:nodnnl");
    if (cpu_backend_has_dnnl()) specs.push_back("cpu:dnnl");
    specs.erase(std::unique(specs.begin(), specs.end()), specs.end());  // an avx2 machine's level is cpu:avx2
    std::erase_if(specs, [&](const std::string& spec) { return !any_contains(filter.backends, spec); });
    const std::vector<int64_t> all_batches = filter.batches.empty() ? std::vector<int64_t>{1, 2, 3, 4, 8, 16, 32, 64, 256} : filter.batches;
    for (const LinearShape& s : shapes) {
        if (!any_contains(filter.shapes, s.name)) continue;
        const int64_t n = s.n, k = s.k;
        Tensor w = Tensor::zeros_or_die(s.w, {n, k});
        std::uniform_int_distribution<int> byte(0, 0x7e);
        std::normal_distribution<float> normal(0.0f, 0.02f);
        for (int64_t i = 0; i < n * k; ++i) {
            if (s.w == DType::f8_e4m3) w.as<uint8_t>()[i] = static_cast<uint8_t>(byte(rng) | (i & 1 ? 0x80 : 0));
            if (s.w == DType::bf16) w.as<uint16_t>()[i] = f32_to_bf16(normal(rng));
            if (s.w == DType::f32) w.as<float>()[i] = normal(rng);
        }
        std::vector<float> scales(static_cast<size_t>(((n + 127) / 128) * ((k + 127) / 128)), 1.0f / 1024);
        LinearWeights lw;
        lw.weight = w.data();
        lw.block_scale = s.w == DType::f8_e4m3 ? scales.data() : nullptr;
        lw.out_features = n;
        lw.in_features = k;
        lw.weight_row_stride = k;
        lw.weight_type = s.w;
        lw.math = s.w == DType::f32 ? LinearMath::f32 : LinearMath::bf16;
        std::vector<int64_t> batches;
        std::vector<Tensor> xs;  // the same activations for every backend
        for (const int64_t m : all_batches) {
            if (n * k > (int64_t{1} << 25) && m > 64) continue;
            batches.push_back(m);
            xs.push_back(Tensor::zeros_or_die(DType::bf16, {m, k}));
            for (int64_t i = 0; i < m * k; ++i) xs.back().as<uint16_t>()[i] = f32_to_bf16(normal(rng) * 50);
        }
        for (const std::string& spec : specs) {
            auto b = backend(spec);
            // Copies of the packed weights, used in turn, that together exceed the last-level cache: a model
            // reads each layer's weights from memory, while one pack timed over and over stays cached.
            std::vector<std::unique_ptr<PreparedLinear>> packs;
            for (size_t total = 0; packs.size() < 64 && total < kColdWeightBytes;) {
                auto prepared = b->linear_prepare(lw);
                if (!prepared.has_value()) {
                    if (packs.empty()) std::printf("%-34s %6s %-26s %s\n", s.name, "-", spec.c_str(), prepared.status().to_string().c_str());
                    break;
                }
                packs.push_back(std::move(prepared).value());
                total += std::max<size_t>(packs.back()->bytes(), 1);
            }
            if (packs.empty()) continue;
            for (size_t bi = 0; bi < batches.size(); ++bi) {
                const int64_t m = batches[bi];
                Tensor y = Tensor::zeros_or_die(DType::bf16, {m, n});
                LinearParams p;
                p.x = xs[bi].data();
                p.y = y.data();
                p.n_tokens = m;
                p.x_row_stride = k;
                p.y_row_stride = n;
                p.x_type = DType::bf16;
                p.y_type = DType::bf16;
                auto plan = b->linear_plan(*packs[0], p);
                if (!plan.has_value()) {
                    std::printf("%-34s %6lld %-26s %s\n", s.name, static_cast<long long>(m), spec.c_str(),
                                plan.status().to_string().c_str());
                    continue;
                }
                size_t turn = 0;
                Tensor ws = Tensor::zeros_or_die(DType::u8, {static_cast<int64_t>(plan->workspace_bytes) + 64});
                const double t = time_call([&] {
                    const Status st = b->linear(*packs[turn++ % packs.size()], *plan, p, {ws.data(), plan->workspace_bytes});
                    if (!st.is_ok()) std::abort();
                });
                // bytes the call must move at least: the weights as packed (1 B/param for own FP8 panels), x and y
                const double bytes = static_cast<double>(packs[0]->bytes()) + static_cast<double>(m * (k + n) * 2);
                std::printf("%-34s %6lld %-26s %10.1f %9.1f %7.0f%% %8.1f\n", s.name, static_cast<long long>(m),
                            spec.c_str(), t * 1e6, bytes / t / 1e9, 100 * bytes / t / 1e9 / bw,
                            2.0 * static_cast<double>(m * n * k) / t / 1e9);
            }
        }
    }
}

void bench_topk() {
    std::printf("\n== top-k over f32 rows (valid picks ascending); baseline: std::nth_element + sort, same rows\n");
    std::printf("%-24s %8s %6s %-26s %12s %12s %8s\n", "rows x cols", "k", "", "backend", "us/row", "base us/row",
                "speedup");
    std::mt19937_64 rng(2);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    struct Case {
        int64_t rows, cols, k;
    };
    for (const Case c : {Case{1, 32768, 512}, Case{1, 131072, 2048}, Case{64, 8192, 512}, Case{16, 65536, 1024}}) {
        std::vector<float> scores(static_cast<size_t>(c.rows * c.cols));
        for (float& v : scores) v = normal(rng);
        std::vector<int32_t> out(static_cast<size_t>(c.rows * c.k));
        std::vector<int32_t> idx(static_cast<size_t>(c.cols));
        const double base = time_call([&] {
            for (int64_t r = 0; r < c.rows; ++r) {
                const float* s = scores.data() + r * c.cols;
                std::iota(idx.begin(), idx.end(), 0);
                std::nth_element(idx.begin(), idx.begin() + c.k - 1, idx.end(),
                                 [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
                std::sort(idx.begin(), idx.begin() + c.k);
                std::copy(idx.begin(), idx.begin() + c.k, out.begin() + r * c.k);
            }
        }) / static_cast<double>(c.rows);
        for (const std::string& spec : {fmt::format("cpu:{}:nodnnl", isa_name(active_isa())), std::string("cpu:avx2:nodnnl"),
                                       std::string("cpu:scalar:nodnnl")}) {
            auto b = backend(spec);
            TopkParams p;
            p.scores = scores.data();
            p.out = out.data();
            p.n_rows = c.rows;
            p.n_cols = c.cols;
            p.k = c.k;
            p.scores_row_stride = c.cols;
            p.out_row_stride = c.k;
            Tensor ws = Tensor::zeros_or_die(DType::u8, {static_cast<int64_t>(b->topk_workspace_size(p)) + 64});
            const double t = time_call([&] {
                if (!b->topk(p, {ws.data(), b->topk_workspace_size(p)}).is_ok()) std::abort();
            }) / static_cast<double>(c.rows);
            std::printf("%8lld x %-13lld %8lld %6s %-26s %12.1f %12.1f %7.1fx\n", static_cast<long long>(c.rows),
                        static_cast<long long>(c.cols), static_cast<long long>(c.k), "", spec.c_str(), t * 1e6,
                        base * 1e6, base / t);
        }
    }
}

void bench_rows(double bw) {
    std::printf("\n== row ops (bytes read + written against the bandwidth ceiling %.1f GB/s)\n", bw);
    std::printf("%-44s %-26s %10s %9s %7s\n", "op", "backend", "us/call", "GB/s", "%bw");
    std::mt19937_64 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const std::string& spec : {fmt::format("cpu:{}:nodnnl", isa_name(active_isa())), std::string("cpu:avx2:nodnnl"),
                                   std::string("cpu:scalar:nodnnl")}) {
        auto b = backend(spec);
        {  // RMSNorm, bf16 [2048, 4096] (a prefill chunk of hidden states)
            const int64_t t = 2048, d = 4096;
            Tensor x = Tensor::zeros_or_die(DType::bf16, {t, d}), y = Tensor::zeros_or_die(DType::bf16, {t, d});
            for (int64_t i = 0; i < t * d; ++i) x.as<uint16_t>()[i] = f32_to_bf16(normal(rng));
            std::vector<float> w(static_cast<size_t>(d), 1.0f);
            RmsNormParams p;
            p.x = x.data();
            p.y = y.data();
            p.weight = w.data();
            p.n_tokens = t;
            p.dim = d;
            p.x_token_stride = p.y_token_stride = d;
            p.x_type = p.y_type = DType::bf16;
            const double s = time_call([&] { (void)b->rms_norm(p); });
            const double bytes = static_cast<double>(t * d * 4);
            std::printf("%-44s %-26s %10.1f %9.1f %6.0f%%\n", "rms_norm bf16 [2048, 4096]", spec.c_str(), s * 1e6,
                        bytes / s / 1e9, 100 * bytes / s / 1e9 / bw);
        }
        for (int64_t t : {int64_t{1}, int64_t{1024}}) {  // RoPE on DSv4 q: [t, 64, 512], last 64 dims, in place
            const int64_t h = 64, d = 512;
            Tensor q = Tensor::zeros_or_die(DType::bf16, {t, h, d});
            for (int64_t i = 0; i < t * h * d; ++i) q.as<uint16_t>()[i] = f32_to_bf16(normal(rng));
            std::vector<int64_t> pos(static_cast<size_t>(t));
            std::iota(pos.begin(), pos.end(), 1000);
            std::vector<float> inv_freq(32);
            RopeFrequencyConfig fc;
            fc.rot_dim = 64;
            fc.base = 160000;
            (void)rope_inv_freq(fc, inv_freq.data());
            RopeParams p;
            p.x = p.y = q.data();
            p.positions = pos.data();
            p.inv_freq = inv_freq.data();
            p.n_tokens = t;
            p.n_heads = h;
            p.head_dim = d;
            p.rot_dim = 64;
            p.x_token_stride = p.y_token_stride = h * d;
            p.x_head_stride = p.y_head_stride = d;
            p.x_type = p.y_type = DType::bf16;
            const double s = time_call([&] { (void)b->rope(p); });
            const double bytes = static_cast<double>(t * h * 64 * 2 * 2);  // the rotated slice, read and written
            std::printf("%-44s %-26s %10.1f %9.1f %6.0f%%\n",
                        fmt::format("rope bf16 in place [{}, 64, 512] last 64", t).c_str(), spec.c_str(), s * 1e6,
                        bytes / s / 1e9, 100 * bytes / s / 1e9 / bw);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "all";
    if (what == "--help" || what == "-h") {
        std::printf("bench_ops [linear|topk|rows|all] [--shape TEXT]... [--m 1,2,3] [--backend TEXT]...\n"
                    "  --shape, --backend: only the linear shapes / backend specs whose name contains TEXT\n"
                    "  --m: the linear batch sizes (default 1,2,3,4,8,16,32,64,256)\n");
        return 0;
    }
    LinearFilter filter;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--shape") {
            filter.shapes.push_back(value);
        } else if (flag == "--backend") {
            filter.backends.push_back(value);
        } else if (flag == "--m") {
            for (size_t b = 0; b < value.size();) {
                const size_t e = std::min(value.find(',', b), value.size());
                filter.batches.push_back(std::stoll(value.substr(b, e - b)));
                b = e + 1;
            }
        } else {
            std::fprintf(stderr, "bench_ops: unknown option %s (see --help)\n", flag.c_str());
            return 1;
        }
    }
    std::printf("active ISA %s, %d threads\n", std::string(isa_name(active_isa())).c_str(), ThreadPool::global().size());
    const double bw = (what == "topk") ? 0.0 : read_bandwidth_gbs();
    if (what == "linear" || what == "all") bench_linear(bw, filter);
    if (what == "topk" || what == "all") bench_topk();
    if (what == "rows" || what == "all") bench_rows(bw);
    return 0;
}

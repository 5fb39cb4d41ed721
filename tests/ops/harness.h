// The conformance harness shared by every op test (DESIGN.md "Every op exists first as contract +
// ref implementation + conformance cases"):
//   * backends_under_test(): every variant of every registered backend kind but ref (backend.h
//     backend_kinds()): the cpu backend at every ISA in supported_isas() without oneDNN, and with oneDNN
//     (forced, and the automatic policy) where the build has it, and every device backend (host-copy);
//     each test compares them with the ref backend. A device whose memory the host cannot touch runs
//     behind a mirror that uploads every GuardedBuffer an op's params point into, runs the op on the
//     device copies and downloads them back (canaries included), so the same host-side tests check it;
//     a params pointer outside every GuardedBuffer fails the op loudly;
//   * GuardedBuffer: every output (and workspace) lives between two 64-byte canaries, and the payload
//     starts poisoned, so writes outside the view and missing writes are both caught;
//   * Rng: seeded inputs; awkward sizes come from the case lists of each test;
//   * tolerances derived from the reduction length and dtypes (see the comment on dot_tolerance).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "core/thread_pool.h"

namespace sieve::test {

// ---- backends -------------------------------------------------------------------------------------

struct NamedBackend {
    std::string spec;
    std::unique_ptr<Backend> backend;
};

// The backends to compare with ref: every registered variant but ref itself. The cpu variants
// ("cpu:<isa>:nodnnl" for every supported ISA, plus "cpu:<active>:dnnl" and "cpu:<active>:auto" when
// oneDNN is built) run on a 3-thread pool so that work splits into uneven chunks; a device that is
// not host_accessible runs behind the uploading mirror (see the file comment).
std::vector<NamedBackend> backends_under_test();
// The one documented case where a backend under test may answer unsupported instead of running:
// oneDNN 2.x has no bf16 matmul below AVX-512, so "cpu:<isa>:dnnl" refuses LinearMath::bf16 there
// (the automatic policy falls back to the own kernels instead).
bool linear_unsupported_is_expected(const std::string& spec, LinearMath math, const Status& st);
std::unique_ptr<Backend> ref_backend();
// The variants of backends_under_test() whose memory is the host's: what "run allocates nothing" and
// the cpu backend's own refusals are checked on (a device behind the uploading mirror allocates its
// copies), and the hand-computed known-value and byte-layout tests, which keep their few inputs in
// stack arrays the mirror cannot upload. Every op's conformance cases run on every variant, devices too.
std::vector<NamedBackend> host_backends_under_test();
// ref first, then each of `backends`, as (spec, backend): for known-value tests every backend must pass,
// the oracle included.
std::vector<std::pair<std::string, Backend*>> ref_and(Backend& ref, std::vector<NamedBackend>& backends);
// Where the mirror finds the heap block (start, bytes) holding a pointer that lies in no GuardedBuffer
// (set by heap_registry.cpp in the binaries that link it; without it such a pointer fails the op).
using HeapBlockLookup = bool (*)(const void* p, const void** start, size_t* bytes);
void set_heap_block_lookup(HeapBlockLookup lookup);
ThreadPool& test_pool();

// ---- guarded memory -----------------------------------------------------------------------------

inline constexpr size_t kGuardBytes = 64;
inline constexpr uint8_t kPoison = 0x7f;  // f32 / bf16 3.4e38, int32 2139062143, e4m3 NaN: never a valid result

// bytes of payload, 64-byte aligned, between two canary blocks; payload filled with `fill`.
class GuardedBuffer {
public:
    explicit GuardedBuffer(size_t bytes, uint8_t fill = kPoison);
    void* data() { return storage_.get() + kGuardBytes; }
    const void* data() const { return storage_.get() + kGuardBytes; }
    template <typename T>
    T* as() {
        return static_cast<T*>(data());
    }
    template <typename T>
    const T* as() const {
        return static_cast<const T*>(data());
    }
    size_t bytes() const { return bytes_; }
    // Both canaries as written at construction.
    testing::AssertionResult guards_intact(const std::string& what) const;

private:
    struct Free {  // also forgets the storage in the registry the device mirror looks pointers up in
        void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t, Free> storage_;
    size_t bytes_;
};

// Bytes of a strided [n_tokens, n_heads, dim] view inside buf that are NOT elements of the view
// must still hold kPoison (the op wrote nothing outside its output view).
testing::AssertionResult untouched_outside_rows(const GuardedBuffer& buf, int64_t n_tokens, int64_t n_heads,
                                                int64_t dim, int64_t token_stride, int64_t head_stride,
                                                size_t elem_size, const std::string& what);
// Elements of a strided row view, extent in elements.
int64_t rows_extent(int64_t n_tokens, int64_t n_heads, int64_t dim, int64_t token_stride, int64_t head_stride);

// ---- inputs -------------------------------------------------------------------------------------

class Rng {
public:
    explicit Rng(uint64_t seed) : engine_(seed) {}
    float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(engine_); }
    float normal(float stddev = 1.0f) { return std::normal_distribution<float>(0.0f, stddev)(engine_); }
    int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }
    bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(engine_); }
    template <typename T>
    const T& pick(const std::vector<T>& v) {
        return v[static_cast<size_t>(integer(0, static_cast<int64_t>(v.size()) - 1))];
    }
    std::mt19937_64& engine() { return engine_; }

private:
    std::mt19937_64 engine_;
};

// Fills a strided [n_tokens, n_heads, dim] view of dtype (f32 | bf16) with gen() values (bf16: rounded).
template <typename Gen>
void fill_rows(void* base, DType t, int64_t n_tokens, int64_t n_heads, int64_t dim, int64_t token_stride,
               int64_t head_stride, Gen&& gen) {
    for (int64_t tk = 0; tk < n_tokens; ++tk)
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < dim; ++i) {
                const int64_t o = tk * token_stride + h * head_stride + i;
                const float v = gen();
                if (t == DType::bf16)
                    static_cast<uint16_t*>(base)[o] = f32_to_bf16(v);
                else
                    static_cast<float*>(base)[o] = v;
            }
}
inline float load_as_f32(const void* base, DType t, int64_t i) {
    return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

// ---- tolerances ---------------------------------------------------------------------------------
//
// u = 2^-24 is the unit roundoff of fp32. A sum of n fp32 terms, in any order and with or without
// FMA, has |fl(Σ t_i) − Σ t_i| ≤ γ_n · Σ |t_i| with γ_n = n·u / (1 − n·u) (Higham, "Accuracy and
// Stability of Numerical Algorithms", §3.1). For a dot product of length K the terms are the
// products, each also rounded once (or exact, inside an FMA), so |Δ| ≤ γ_{K+1} · Σ|a_i·b_i|.
// The ref backend accumulates in double and rounds once (≤ u·|y|), so
//   |cpu − ref| ≤ γ_{K+1} · Σ|a_i·b_i| + u·|y| (+ the rounding of a bias add on both sides).
// A bf16 output rounds each side once more: two values within δ round to bf16 values within
// δ + one bf16 ulp of the larger magnitude (they may straddle a rounding boundary).

inline constexpr double kU = 1.0 / 16777216.0;  // 2^-24
inline double gamma_n(double n) { return n * kU / (1.0 - n * kU); }
// One bf16 ulp at magnitude |v| (8 significant bits): 2^(floor(log2|v|) − 7); subnormal floor 2^-133.
double bf16_ulp(double v);

// |cpu − ref| bound for y = Σ_{i<K} a_i·b_i (+ bias): see above.
inline double dot_tolerance(int64_t k, double sum_abs_products, double abs_y, double abs_bias, bool bf16_out) {
    double tol = gamma_n(static_cast<double>(k) + 1.0) * sum_abs_products + 2.0 * kU * (abs_y + abs_bias) + 1e-30;
    if (bf16_out) tol += bf16_ulp(abs_y + tol);
    return tol;
}

// Compares n values: |got − want| ≤ tol(i); NaN must match NaN. Reports the first few failures.
testing::AssertionResult all_close(const std::vector<double>& want, const std::vector<double>& got,
                                   const std::vector<double>& tol, const std::string& what);

// Bytes equal; reports the first differing offsets.
testing::AssertionResult bytes_equal(const void* want, const void* got, size_t n, const std::string& what);

// ---- shared case runners (linear_test.cpp, topk_test.cpp; reused by large_shapes_test.cpp) ------

enum class ScaleKind { pow2, arbitrary, huge, nan_byte };
struct LinearCase {
    int64_t m, n, k;
    DType w_type, x_type, y_type;
    LinearMath math;
    bool bias, padded, x_broadcast;
    ScaleKind scales;
    int64_t groups = 1;  // ops/linear.h "Groups": n in groups of n / groups rows, x rows of groups · k values
};
// Prepares, plans and runs the case on ref and every backend; compares with dot_tolerance.
void run_linear_case(Rng& rng, const LinearCase& c, Backend& ref, const std::vector<NamedBackend>& backends);

enum class TopkDist { uniform, few_values, adjacent_ulps, constant, ascending, descending, specials, zeros_and_signs };
// Runs one top-k case (random valid lengths when with_valid_len) on ref and every backend; exact match.
void run_topk_case(Rng& rng, const std::vector<NamedBackend>& backends, Backend& ref, int64_t n_rows, int64_t n_cols,
                   int64_t k, TopkDist dist, bool with_valid_len, bool padded);

}  // namespace sieve::test

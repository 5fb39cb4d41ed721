#include "backends/cpu/cpu_linear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "core/cpu_features.h"
#include "sieve/ops/op_common.h"
#ifdef SIEVE_HAS_DNNL
#include "backends/cpu/dnnl_gemm.h"
#endif

namespace sieve::cpu {

namespace {

constexpr int64_t kTaskCols = 2 * kPanelCols;  // one task: 2 panels …
constexpr int64_t kTaskRows = 64;              // … × 64 rows (AMX: kAmxRowBlocks 16-row blocks sharing decoded weights)
constexpr int64_t kConvertBlockRows = 64;      // own GEMM: activations converted 64 rows at a time
#ifdef SIEVE_HAS_DNNL
constexpr int64_t kDnnlChunkRows = 256;        // oneDNN: rows per call when staging buffers are needed
#endif

// Can the fp8 panels (bytes decoded in the kernel, the block scale applied to the activation: (x·S)·e4m3)
// stand for W? Needs no NaN byte and finite scales; for bf16 math, power-of-two scales ≥ 2^-100 (so that
// W is exact in bf16, as LinearMath::bf16 requires). With a power-of-two S the kernel's products equal
// x·W exactly; with another S, x·S is one extra fp32 rounding per product, inside the dot product's error
// bound (ops/linear.h leaves the accumulation order open). Returns "" or the reason it cannot.
std::string fp8_panels_blocker(const LinearWeights& w) {
    const int64_t n_nb = (w.out_features + kLinearFp8Block - 1) / kLinearFp8Block;
    const int64_t n_kb = (w.in_features + kLinearFp8Block - 1) / kLinearFp8Block;
    for (int64_t b = 0; b < n_nb * n_kb; ++b) {
        const float s = w.block_scale[b];
        if (!std::isfinite(s)) return fmt::format("block_scale[{}] = {} is not finite", b, s);
        if (w.math == LinearMath::bf16) {
            int e = 0;
            const float m = std::frexp(s, &e);
            if (s != 0.0f && (std::fabs(m) != 0.5f || e - 1 < -100))
                return fmt::format("block_scale[{}] = {} is not a power of two ≥ 2^-100 (bf16 math)", b, s);
        }
    }
    for (int64_t o = 0; o < w.out_features; ++o) {
        const uint8_t* row = static_cast<const uint8_t*>(w.weight) + o * w.weight_row_stride;
        for (int64_t i = 0; i < w.in_features; ++i)
            if ((row[i] & 0x7f) == 0x7f) return fmt::format("weight[{}, {}] is an e4m3 NaN", o, i);
    }
    return {};
}

Status pack_own(const LinearWeights& w, Isa isa, CpuPreparedLinear& out) {
    const int64_t n = w.out_features, k = w.in_features;
    out.n_panels = (n + kPanelCols - 1) / kPanelCols;
    std::string fp8_blocker;
    if (w.weight_type == DType::f8_e4m3) fp8_blocker = fp8_panels_blocker(w);
    // fp8_pairs needs AVX512_VBMI for its table decode (kernels_impl.inl fp8_pairs_tile); without it (an
    // AVX512_BF16 processor without VBMI, or SIEVE_NO_VBMI=1) the fp8 panels below.
    if (w.weight_type == DType::f8_e4m3 && fp8_blocker.empty() && isa >= Isa::avx512_bf16 &&
        w.math == LinearMath::bf16 && cpu_features().avx512_vbmi) {
        out.format = PanelFormat::fp8_pairs;
        out.own_note = "fp8 pair panels (e4m3 bytes decoded to bf16 by table lookups, vdpbf16ps; block scale per 128 k)";
    } else if (w.weight_type == DType::f8_e4m3 && fp8_blocker.empty()) {
        out.format = PanelFormat::fp8;
        out.own_note = "fp8 panels (e4m3 bytes decoded in the kernel; block scale applied to x)";
    } else if (w.math == LinearMath::bf16 || w.weight_type == DType::bf16) {
        out.format = PanelFormat::bf16_pairs;
        out.own_note = w.math == LinearMath::bf16 ? "bf16 pair panels (W rounded to bf16: LinearMath::bf16)"
                                                  : "bf16 pair panels (bf16 weights, widened exactly in the kernel)";
    } else {
        out.format = PanelFormat::f32;
        out.own_note = "f32 panels";
    }
    if (!fp8_blocker.empty()) out.own_note += "; fp8 dequantized at load because " + fp8_blocker;

    const int64_t k2 = (k + 1) / 2;
    switch (out.format) {
        case PanelFormat::f32: out.panel_bytes = k * kPanelCols * 4; break;
        case PanelFormat::bf16_pairs: out.panel_bytes = k2 * kPanelCols * 2 * 2; break;
        case PanelFormat::fp8: out.panel_bytes = k * kPanelCols; break;
        case PanelFormat::fp8_pairs: out.panel_bytes = (k2 + 1) / 2 * 64; break;  // groups of two k pairs
    }
    SIEVE_ASSIGN_OR_RETURN(out.panels, Tensor::zeros(DType::u8, {out.n_panels * out.panel_bytes}));
    char* base = static_cast<char*>(out.panels.data());
    for (int64_t p = 0; p < out.n_panels; ++p) {
        char* panel = base + p * out.panel_bytes;
        for (int64_t c = 0; c < kPanelCols; ++c) {
            const int64_t o = p * kPanelCols + c;
            if (o >= n) break;  // padding columns stay zero
            for (int64_t i = 0; i < k; ++i) {
                switch (out.format) {
                    case PanelFormat::f32:
                        reinterpret_cast<float*>(panel)[i * kPanelCols + c] = linear_weight_value(w, o, i);
                        break;
                    case PanelFormat::bf16_pairs:
                        reinterpret_cast<uint16_t*>(panel)[(i / 2) * kPanelCols * 2 + 2 * c + (i & 1)] =
                            f32_to_bf16(linear_weight_value(w, o, i));  // exact: bf16-representable for bf16 math
                        break;
                    case PanelFormat::fp8:
                        reinterpret_cast<uint8_t*>(panel)[i * kPanelCols + c] =
                            static_cast<const uint8_t*>(w.weight)[o * w.weight_row_stride + i];
                        break;
                    case PanelFormat::fp8_pairs: {  // kernels.h: the group layout of two k pairs
                        const int64_t j = i / 2, word = 2 * c + (i & 1);
                        reinterpret_cast<uint8_t*>(panel)[(j / 2) * 64 + 16 * (word / 8) + 8 * (j & 1) + word % 8] =
                            static_cast<const uint8_t*>(w.weight)[o * w.weight_row_stride + i];
                        break;
                    }
                }
            }
        }
    }
    if (out.format == PanelFormat::fp8 || out.format == PanelFormat::fp8_pairs) {
        const int64_t n_blocks = ((n + 127) / 128) * ((k + 127) / 128);
        out.fp8_scale.assign(w.block_scale, w.block_scale + n_blocks);
    }
    out.has_own = true;
    return Status::ok();
}

struct PlanState {
    bool dnnl = false;
    // activations: converted into the workspace at x_offset (rows of x_stride elements), else read in place
    bool convert_x = false;
    bool dpbf16 = false;
    int64_t block_rows = 0;      // rows per conversion block / oneDNN call
    int64_t x_stride = 0;        // elements of the converted rows
    size_t x_offset = 0;
    // oneDNN only
    bool stage_y = false;        // f32 staging rows at y_offset, then rounded to bf16
    size_t y_offset = 0, scratch_offset = 0;
#ifdef SIEVE_HAS_DNNL
    std::shared_ptr<DnnlGemmPlan> gemm;
#endif
};

}  // namespace

namespace {
std::atomic<int64_t> g_live_pack_bytes{0};
}  // namespace

CpuPreparedLinear::~CpuPreparedLinear() { g_live_pack_bytes -= static_cast<int64_t>(counted_bytes_); }

void CpuPreparedLinear::count_live_bytes() {
    g_live_pack_bytes -= static_cast<int64_t>(counted_bytes_);
    counted_bytes_ = bytes();
    g_live_pack_bytes += static_cast<int64_t>(counted_bytes_);
}

size_t cpu_live_pack_bytes() { return static_cast<size_t>(g_live_pack_bytes.load()); }

size_t CpuPreparedLinear::bytes() const {
    size_t b = panels.nbytes() + fp8_scale.size() * sizeof(float) + bias.size() * sizeof(float);
#ifdef SIEVE_HAS_DNNL
    if (dnnl) b += dnnl_packed_bytes(*dnnl);
#endif
    return b;
}

std::string CpuPreparedLinear::describe() const {
    std::string s;
    if (has_own) s = "own: " + own_note;
    if (!dnnl_note.empty()) s += "; oneDNN unavailable (" + dnnl_note + "): own kernels for every batch";
    if (dnnl) {
        if (!s.empty()) s += "; ";
        // the numerics choice of the deployed profile, stated where reports can show it
        s += math() == LinearMath::bf16
                 ? "oneDNN: bf16 packed (LinearMath::bf16: f32 weights and FP8 weights with non-power-of-two "
                   "scales rounded to bf16; FP8 with power-of-two scales and bf16 weights exact)"
                 : "oneDNN: f32 packed (FP8 and bf16 weights widened exactly)";
    }
    return s;
}

Expected<std::unique_ptr<PreparedLinear>> cpu_linear_prepare(const CpuLinearContext& c, const LinearWeights& w) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(w));
    if (w.groups != 1) return internal_error("cpu linear: {} groups reach the plain pack (the backend splits them)", w.groups);
    auto out = std::make_unique<CpuPreparedLinear>(w);
    const int64_t n = w.out_features;
    if (w.bias != nullptr) {
        out->bias.resize(static_cast<size_t>(n));
        for (int64_t o = 0; o < n; ++o)
            out->bias[static_cast<size_t>(o)] = w.bias_type == DType::bf16
                                                    ? bf16_to_f32(static_cast<const uint16_t*>(w.bias)[o])
                                                    : static_cast<const float*>(w.bias)[o];
    }
    const CpuGemm gemm = c.options->gemm;
    if (gemm != CpuGemm::dnnl) SIEVE_RETURN_IF_ERROR(pack_own(w, c.isa, *out));
    const bool want_dnnl = gemm == CpuGemm::dnnl || (gemm == CpuGemm::automatic && w.weight_type == DType::f8_e4m3);
    if (want_dnnl) {
#ifdef SIEVE_HAS_DNNL
        // A dense [N, K] copy in the compute dtype for oneDNN's reorder; freed after packing.
        const int64_t k = w.in_features;
        const bool bf16 = w.math == LinearMath::bf16;
        SIEVE_ASSIGN_OR_RETURN(Tensor dense, Tensor::zeros(bf16 ? DType::bf16 : DType::f32, {n, k}));
        for (int64_t o = 0; o < n; ++o)
            for (int64_t i = 0; i < k; ++i) {
                const float v = linear_weight_value(w, o, i);
                if (bf16)
                    dense.as<uint16_t>()[o * k + i] = f32_to_bf16(v);
                else
                    dense.as<float>()[o * k + i] = v;
            }
        auto packed = dnnl_pack_weights(dense.data(), bf16, n, k, out->bias.empty() ? nullptr : out->bias.data());
        if (packed.has_value()) {
            out->dnnl = std::move(packed).value();
        } else if (gemm == CpuGemm::automatic && packed.status().code() == StatusCode::unsupported) {
            // e.g. oneDNN 2.x has no bf16 matmul below AVX-512: the own kernels, which implement the same
            // contract, take every batch (no change of numerics beyond the accumulation order).
            out->dnnl_note = packed.status().message();
        } else {
            return packed.status();
        }
#else
        return unsupported_error("cpu linear: oneDNN requested but this build has SIEVE_WITH_DNNL=OFF");
#endif
    }
    out->count_live_bytes();
    return std::unique_ptr<PreparedLinear>(std::move(out));
}

Expected<LinearPlan> cpu_linear_plan(const CpuLinearContext& c, const CpuPreparedLinear& w, const LinearParams& shape) {
    const int64_t n = w.out_features(), k = w.in_features(), m = shape.n_tokens;
    SIEVE_RETURN_IF_ERROR(validate(shape, k, n, /*check_pointers=*/false));
    auto state = std::make_shared<PlanState>();
    size_t bytes = 0;
    const bool math_bf16 = w.math() == LinearMath::bf16;
    const CpuGemm gemm = c.options->gemm;
    state->dnnl = w.dnnl != nullptr && (gemm == CpuGemm::dnnl || !w.has_own || m >= c.options->dnnl_min_tokens);
    if (state->dnnl) {
#ifdef SIEVE_HAS_DNNL
        const DType compute = math_bf16 ? DType::bf16 : DType::f32;
        // Rows are packed contiguously for oneDNN whenever they are not already: oneDNN 2.6 runs a
        // padded-row source (x_row_stride > k) orders of magnitude slower (seconds for 40×4096).
        state->convert_x = shape.x_type != compute || (m > 1 && shape.x_row_stride != k);
        state->stage_y = shape.y_type != DType::f32;
        const bool staged = state->convert_x || state->stage_y;
        state->block_rows = staged ? std::min(m, kDnnlChunkRows) : m;
        state->x_stride = state->convert_x ? k : (m > 1 ? shape.x_row_stride : k);
        const int64_t dst_stride = state->stage_y ? n : (m > 1 ? shape.y_row_stride : n);
        if (m > 0) {
            SIEVE_ASSIGN_OR_RETURN(state->gemm, dnnl_plan(*w.dnnl, m, state->block_rows, state->x_stride, dst_stride));
            state->x_offset = bytes;
            if (state->convert_x) bytes += workspace_round_up(static_cast<size_t>(state->block_rows * k) * dtype_size(compute));
            state->y_offset = bytes;
            if (state->stage_y) bytes += workspace_round_up(static_cast<size_t>(state->block_rows * n) * sizeof(float));
            state->scratch_offset = bytes;
            bytes += workspace_round_up(dnnl_scratchpad_bytes(*state->gemm));
        }
#else
        return internal_error("cpu linear: oneDNN weights in a build without oneDNN");
#endif
    } else {
        if (!w.has_own) return internal_error("cpu linear: no packed weights for the own kernels");
        state->dpbf16 = c.isa >= Isa::avx512_bf16 && math_bf16 &&
                        (w.format == PanelFormat::bf16_pairs || w.format == PanelFormat::fp8_pairs);
        state->convert_x = state->dpbf16 || shape.x_type != DType::f32 || math_bf16;
        state->block_rows = state->convert_x ? std::min(m, kConvertBlockRows) : m;
        state->x_stride = state->dpbf16 ? (k + 1) / 2 : k;
        state->x_offset = 0;
        if (state->convert_x) bytes = workspace_round_up(static_cast<size_t>(state->block_rows * state->x_stride) * 4);
    }
    LinearPlan plan = LinearPlan::of_shape(shape);  // n_tokens = m
    plan.workspace_bytes = bytes;
    if (state->dnnl) {
#ifdef SIEVE_HAS_DNNL
        plan.kernel = fmt::format("oneDNN matmul {} ({})", math_bf16 ? "bf16" : "f32", dnnl_isa_name());
#endif
    } else {
        const char* format = w.format == PanelFormat::fp8 || w.format == PanelFormat::fp8_pairs ? "fp8"
                             : w.format == PanelFormat::f32                                    ? "f32"
                                                                                               : "bf16";
        plan.kernel = fmt::format("linear_{}{}_{}", format, state->dpbf16 ? "_dpbf16" : "", isa_name(c.isa));
    }
    plan.state = state;
    return plan;
}

Status cpu_linear_run(const CpuLinearContext& c, const CpuPreparedLinear& w, const LinearPlan& plan,
                      const LinearParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p, w.in_features(), w.out_features()));
    SIEVE_RETURN_IF_ERROR(check_linear_plan(plan, p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu linear", ws, plan.workspace_bytes));
    const auto* state = static_cast<const PlanState*>(plan.state.get());
    if (state == nullptr) return invalid_argument_error("cpu linear: the plan was not made by the cpu backend");
    const int64_t n = w.out_features(), k = w.in_features(), m = p.n_tokens;
    if (m == 0) return Status::ok();
    const CpuKernels& kern = *c.kernels;
    ThreadPool& pool = *c.pool;
    const bool x_bf16 = p.x_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    const bool math_bf16 = w.math() == LinearMath::bf16;
    char* ws_base = static_cast<char*>(ws.data);
    const size_t x_elem = x_bf16 ? 2 : 4, y_elem = y_bf16 ? 2 : 4;

    if (state->dnnl) {
#ifdef SIEVE_HAS_DNNL
        for (int64_t r0 = 0; r0 < m; r0 += state->block_rows) {
            const int64_t rows = std::min(state->block_rows, m - r0);
            const char* x_rows = static_cast<const char*>(p.x) + r0 * p.x_row_stride * static_cast<int64_t>(x_elem);
            const void* src = x_rows;
            if (state->convert_x) {
                void* buf = ws_base + state->x_offset;
                if (math_bf16 && !x_bf16)
                    parallel_chunks(pool, rows, min_chunk_for(k), [&](int64_t b, int64_t e) {
                        kern.convert_f32_to_bf16_rows(reinterpret_cast<const float*>(x_rows), p.x_row_stride,
                                                      static_cast<uint16_t*>(buf), k, k, b, e);
                    });
                else if (math_bf16)  // bf16 rows with an unusable stride: copy
                    for (int64_t r = 0; r < rows; ++r)
                        std::memcpy(static_cast<uint16_t*>(buf) + r * k, x_rows + r * p.x_row_stride * 2,
                                    static_cast<size_t>(k) * 2);
                else
                    parallel_chunks(pool, rows, min_chunk_for(k), [&](int64_t b, int64_t e) {
                        kern.linear_convert_x(x_rows, x_bf16, p.x_row_stride, false, k, static_cast<float*>(buf), k, b, e);
                    });
                src = buf;
            }
            char* y_rows = static_cast<char*>(p.y) + r0 * p.y_row_stride * static_cast<int64_t>(y_elem);
            float* dst = state->stage_y ? reinterpret_cast<float*>(ws_base + state->y_offset) : reinterpret_cast<float*>(y_rows);
            pool.park();  // oneDNN's OpenMP threads take the cores now (core/thread_pool.h)
            SIEVE_RETURN_IF_ERROR(dnnl_run(*w.dnnl, *state->gemm, src, dst, rows, ws_base + state->scratch_offset));
            if (state->stage_y)
                parallel_chunks(pool, rows, min_chunk_for(n), [&](int64_t b, int64_t e) {
                    kern.convert_f32_to_bf16_rows(dst, n, reinterpret_cast<uint16_t*>(y_rows), p.y_row_stride, n, b, e);
                });
        }
        return Status::ok();
#else
        return internal_error("cpu linear: oneDNN plan in a build without oneDNN");
#endif
    }

    LinearKernelArgs a;
    a.panels = w.panels.data();
    a.panel_bytes = w.panel_bytes;
    a.fp8_scale = w.fp8_scale.empty() ? nullptr : w.fp8_scale.data();
    a.bias = w.bias.empty() ? nullptr : w.bias.data();
    a.n = n;
    a.k = k;
    a.format = w.format;
    a.y_bf16 = y_bf16;
    a.y_stride = p.y_row_stride;
    a.dpbf16 = state->dpbf16;
    const int64_t n_col_tasks = (n + kTaskCols - 1) / kTaskCols;
    for (int64_t r0 = 0; r0 < m; r0 += state->block_rows) {
        const int64_t rows = std::min(state->block_rows, m - r0);
        const char* x_rows = static_cast<const char*>(p.x) + r0 * p.x_row_stride * static_cast<int64_t>(x_elem);
        if (state->dpbf16) {
            auto* buf = reinterpret_cast<uint32_t*>(ws_base + state->x_offset);
            parallel_chunks(pool, rows, min_chunk_for(k), [&](int64_t b, int64_t e) {
                kern.linear_convert_x_pairs(x_rows, x_bf16, p.x_row_stride, k, buf, state->x_stride, b, e);
            });
            a.x_pairs = buf;
            a.x_pairs_stride = state->x_stride;
            a.x = reinterpret_cast<const float*>(buf);  // unused by the dpbf16 kernel; kept non-null
            a.x_stride = 0;
        } else if (state->convert_x) {
            auto* buf = reinterpret_cast<float*>(ws_base + state->x_offset);
            parallel_chunks(pool, rows, min_chunk_for(k), [&](int64_t b, int64_t e) {
                kern.linear_convert_x(x_rows, x_bf16, p.x_row_stride, math_bf16, k, buf, state->x_stride, b, e);
            });
            a.x = buf;
            a.x_stride = state->x_stride;
        } else {
            a.x = reinterpret_cast<const float*>(x_rows);
            a.x_stride = p.x_row_stride;
        }
        a.y = static_cast<char*>(p.y) + r0 * p.y_row_stride * static_cast<int64_t>(y_elem);
        const int64_t n_row_tasks = (rows + kTaskRows - 1) / kTaskRows;
        const int64_t task_cost = kTaskCols * std::min(rows, kTaskRows) * k;
        // tasks ordered column-group-major: one thread's consecutive tasks reuse the same weight panels
        parallel_chunks(pool, n_col_tasks * n_row_tasks, min_chunk_for(task_cost, 1 << 18), [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                const int64_t cg = t / n_row_tasks, rg = t % n_row_tasks;
                const int64_t p0 = cg * 2, p1 = std::min(p0 + 2, w.n_panels);
                const int64_t row_b = rg * kTaskRows, row_e = std::min(rows, row_b + kTaskRows);
                kern.linear_tile(a, row_b, row_e, p0, p1);
            }
        });
    }
    return Status::ok();
}

}  // namespace sieve::cpu

// The cpu backend's kernel table: one instance per ISA level (kernels_<isa>.cpp), picked at
// backend creation. Kernels are leaf functions over a range of rows/panels; cpu_backend.cpp does
// validation, threading and workspace handling around them.
//
// This header is included by the per-ISA translation units, so it holds only plain data types,
// constants and declarations: no inline function bodies (see simd.h, "ODR safety").
#pragma once

#include <cstddef>
#include <cstdint>

#include "sieve/ops/hadamard.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"

namespace sieve::cpu {

// ---- linear: packed weight panels ----------------------------------------------------------------
// W [N, K] is packed in panels of kPanelCols output columns (the last panel zero-padded):
//   f32         panel p, element (k, c) at float  [p·K·16 + k·16 + c]
//   bf16_pairs  panel p, element (k, c) at uint16 [p·K2·32 + (k/2)·32 + 2c + (k & 1)], K2 = ceil(K/2),
//               odd K padded with a zero k — the pair layout of vdpbf16ps, also read by the FMA kernels
//   fp8         panel p, element (k, c) at byte   [p·K·16 + k·16 + c], and fp8_scale[⌊16p/128⌋, ⌊k/128⌋] =
//               block_scale (the kernels decode bytes to fp32 with vf_e4m3_decode, simd.h)
//   fp8_pairs   the bf16_pairs word order in bytes, two k pairs per 64-byte group: with j = k/2 and word
//               w = 2c + (k & 1) of pair j (0..31), element (k, c) at byte
//               [p·G·64 + (j/2)·64 + 16·(w/8) + 8·(j & 1) + w % 8], G = ceil(K2/2) (padding 0): unpacking
//               a group's decoded bytes low/high per 128-bit lane (vpunpck{l,h}bw) gives pair 2g, then pair
//               2g + 1, in word order. Same fp8_scale; for the avx512_bf16 kernel's vdpbf16ps with table
//               decoding (AVX512_VBMI), LinearMath::bf16 with power-of-two scales only, where the bf16
//               values are exact
inline constexpr int64_t kPanelCols = 16;
enum class PanelFormat : uint8_t { f32, bf16_pairs, fp8, fp8_pairs };

struct LinearKernelArgs {
    const float* x = nullptr;          // [n_rows, K] fp32 activations (converted), row stride x_stride
    const uint32_t* x_pairs = nullptr; // [n_rows, K2] bf16 pairs (x[2j] low, x[2j+1] high), row stride x_pairs_stride; dpbf16 only
    int64_t x_stride = 0, x_pairs_stride = 0;
    const void* panels = nullptr;      // packed W, panel p at panels + p·panel_bytes
    int64_t panel_bytes = 0;
    const float* fp8_scale = nullptr;  // [ceil(N/128), ceil(K/128)] block scales, fp8 panels only
    const float* bias = nullptr;       // [N] or nullptr
    void* y = nullptr;                 // [n_rows, N], row stride y_stride, bf16 when y_bf16 else f32
    int64_t y_stride = 0;
    int64_t n = 0, k = 0;
    PanelFormat format = PanelFormat::f32;
    bool y_bf16 = false;
    bool dpbf16 = false;               // use vdpbf16ps on x_pairs (avx512_bf16 table only)
};

// ---- top-k: a streaming selection state (ops/topk.h semantics) ---------------------------------
// Candidates arrive in ascending index order (push), possibly tile by tile as a scoring kernel
// produces them; the buffer keeps those that can still be in the top k. When it fills up it is
// cut to the best k (radix select, stable) and the admission threshold rises to (k-th key + 1):
// a later candidate equal to the k-th key loses the tie to an earlier one.
struct TopkStream {
    int32_t* keys = nullptr;   // [capacity] ranking keys (see kernels_impl.inl, topk_rank_key)
    int32_t* idx = nullptr;    // [capacity] their column indices, ascending
    int64_t count = 0;
    int64_t capacity = 0;      // ≥ k + kTopkStreamSlack
    int64_t k = 0;
    int32_t threshold = INT32_MIN;  // candidates with key < threshold are not admitted
};
inline constexpr int64_t kTopkStreamSlack = 256;  // room kept above k so a cut drops ≥ 256 entries

// ---- the table ---------------------------------------------------------------------------------
struct CpuKernels {
    const char* isa_name;
    // rows [row_begin, row_end) of the flattened (token, head) index t·n_heads + h
    void (*rms_norm_rows)(const RmsNormParams& p, int64_t row_begin, int64_t row_end);
    void (*layer_norm_rows)(const LayerNormParams& p, int64_t row_begin, int64_t row_end);
    void (*quant_fp8_rows)(const QuantFp8Params& p, int64_t row_begin, int64_t row_end);
    // One FP8 group by the same quantizer (ops/quant_fp8.h): n values of x (f32, or bf16 when x_bf16; f32
    // values rounded to bf16 first when round_bf16) → e4m3 codes q[0, n); returns the scale, NaN for a
    // poisoned group. The cache stores' quantizer (cpu_cache_ops.cpp).
    float (*quant_fp8_group)(const void* x, bool x_bf16, bool round_bf16, int64_t n, uint8_t* q);
    void (*hadamard_rows)(const HadamardParams& p, int64_t row_begin, int64_t row_end);
    // tokens [token_begin, token_end) × heads [head_begin, head_end)
    void (*rope_block)(const RopeParams& p, int64_t token_begin, int64_t token_end, int64_t head_begin,
                       int64_t head_end);
    // y rows [row_begin, row_end) × panels [panel_begin, panel_end)
    void (*linear_tile)(const LinearKernelArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
                        int64_t panel_end);
    // out[r, i] = X(x[r·x_stride + i]) for rows [row_begin, row_end), i < k; X widens bf16, and rounds
    // to bf16 first when round_bf16 (LinearMath::bf16). out: [rows, k] f32, row stride out_stride.
    void (*linear_convert_x)(const void* x, bool x_bf16, int64_t x_stride, bool round_bf16, int64_t k,
                             float* out, int64_t out_stride, int64_t row_begin, int64_t row_end);
    // out[r, j] = bf16(X[2j]) | bf16(X[2j+1]) << 16 (X[k] = 0 for odd k): the dpbf16 activation layout.
    void (*linear_convert_x_pairs)(const void* x, bool x_bf16, int64_t x_stride, int64_t k, uint32_t* out,
                                   int64_t out_stride, int64_t row_begin, int64_t row_end);
    // f32 rows → bf16 rows (RNE), for GEMMs that produce f32.
    void (*convert_f32_to_bf16_rows)(const float* src, int64_t src_stride, uint16_t* dst, int64_t dst_stride,
                                     int64_t n, int64_t row_begin, int64_t row_end);
    void (*topk_stream_push)(TopkStream* s, const float* scores, int64_t n, int64_t base_index);
    // Cuts to the best k, writes their indices ascending to out and returns how many (≤ k).
    int64_t (*topk_stream_finish)(TopkStream* s, int32_t* out);
};

extern const CpuKernels kCpuKernelsScalar;
extern const CpuKernels kCpuKernelsAvx2;
extern const CpuKernels kCpuKernelsAvx512;
extern const CpuKernels kCpuKernelsAvx512Bf16;
extern const CpuKernels kCpuKernelsAmxBf16;

}  // namespace sieve::cpu

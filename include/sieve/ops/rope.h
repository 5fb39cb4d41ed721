// ops/rope.h — rotary position embedding on a slice of each head, and its frequency table.
//
// Frequency table (rope_inv_freq; deepseek_v4.md §2.3, dsa_mla.md §2.2, qsa.md §4.1), D = rot_dim,
// i = 0 … D/2 − 1, all fp32 unless said otherwise:
//   p_i = base^(2i/D)                          powf on fp32 operands, as torch `base ** (arange(0,D,2)/D)`
//   f_i = 1 / p_i                              (no YaRN: done)
// YaRN (factor s, original context L0, β_fast, β_slow), following transformers `_compute_yarn_parameters`,
// the oracle of the golden tests (deepseek_v4.md §2.3 notes the [ref]'s `(1/p)/s` may differ by 1 ulp):
//   corr(n) = D · ln(L0 / (n · 2π)) / (2 · ln base)          (double)
//   low  = max(floor(corr(β_fast)), 0), high = min(ceil(corr(β_slow)), D − 1)    (no floor/ceil when !truncate)
//   if low == high: high += 0.001
//   ramp_i  = clamp((i − low) / (high − low), 0, 1)          (fp32; i runs over the D/2 frequencies although
//                                                              low/high are clamped to [0, D − 1])
//   extra_i = 1 − ramp_i
//   f_i     = (1 / (s · p_i)) · (1 − extra_i) + (1 / p_i) · extra_i
// Release values: base 160000, D 64, L0 65536, β 32/1 → low 15, high 25 (deepseek_v4.md §2.3);
// base 10000, D 64, L0 4096 → 10 and 23 (dsa_mla.md §2.2).
//
// Rotation (rope): for token t at position p = positions[t] and head h, on the rotated slice of r =
// rot_dim dims starting at n = 0 (slice first: qsa.md §4.1, V3.2 indexer dsa_mla.md §2.2) or n = head_dim − r
// (slice last: deepseek_v4.md §1.3, §2.3, MLA rope dims, Hy4 indexer):
//   angle_i = float(p) · f_i                  fp32 product (torch `positions.float()` times inv_freq)
//   c_i = (float)cos((double)angle_i) · a,  s_i = (float)sin((double)angle_i) · a
//                                              the fp32 product; a = attention_factor (YaRN magnitude, 1 for the
//                                              released configs; deepseek_v4.md §1.4, dsa_mla.md "Decisions")
//     cos/sin are evaluated in double on the exactly widened fp32 angle and rounded once to fp32 (round to
//     nearest even): correctly rounded but for vanishingly rare angles, and reproducible on a GPU, whose
//     double cos/sin are within a couple of ulps of double (backends/cuda/row_rope.cuh), whereas the bits of
//     glibc's fp32 cosf/sinf have no device counterpart. (Device reproducibility is the only reason: torch's
//     fp32 cos/sin, the golden oracle, match neither bit for bit and are compared with a tolerance.)
//   pair i = (x[n+2i], x[n+2i+1])   interleaved (GPT-J, deepseek_v4.md §2.3; dsa_mla.md §2.2 MLA slice)
//          = (x[n+i], x[n+i+r/2])   half_split (NeoX rotate_half; qsa.md §4.1, V3.2 indexer)
//   forward: y0 = x0·c − x1·s ;  y1 = x0·s + x1·c
//   inverse: y0 = x0·c + x1·s ;  y1 = x1·c − x0·s      (conjugate rotation, deepseek_v4.md §2.3, §3.9)
// Each product is rounded to fp32, then the sum (no fused multiply-add), and c/s come from rope_cos_sin(),
// so every backend produces the same bits. Dims outside the slice are copied. The result is cast to
// y_type once (bf16: round to nearest even). y may be x (same pointer, strides and dtype): in place.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

// ---- frequency table (load time) -------------------------------------------------------------

struct RopeYarn {
    double factor = 1.0;                      // s: config rope_scaling.factor
    double original_max_position = 0.0;      // L0: original_max_position_embeddings
    double beta_fast = 32.0;
    double beta_slow = 1.0;
    bool truncate = true;                     // floor/ceil the correction range (transformers `truncate`)
};

struct RopeFrequencyConfig {
    int64_t rot_dim = 0;                      // D, even, ≥ 2
    double base = 10000.0;                    // θ: rope_theta / compress_rope_theta
    bool yarn = false;
    RopeYarn yarn_params;
};

// The YaRN correction range [low, high] (after clamping and the low == high adjustment).
struct RopeYarnRange {
    double low = 0.0, high = 0.0;
};
Expected<RopeYarnRange> rope_yarn_range(const RopeFrequencyConfig& c);

// Writes f_0 … f_{D/2−1} into inv_freq ([rot_dim / 2]).
Status rope_inv_freq(const RopeFrequencyConfig& c, float* inv_freq);

// YaRN's magnitude m(s, mscale) = 0.1 · mscale · ln(s) + 1, and 1 for s ≤ 1 (dsa_mla.md "Decisions", V3.2);
// the attention_factor of a config that leaves it out is m(s, 1) (deepseek_v4.md §1.4).
double rope_yarn_mscale(double factor, double mscale);

// ---- rotation ------------------------------------------------------------------------------------

enum class RopePairing : uint8_t { interleaved, half_split };
enum class RopeSlice : uint8_t { first, last };

struct RopeParams {
    const void* x = nullptr;          // [n_tokens, n_heads, head_dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    void* y = nullptr;                // [n_tokens, n_heads, head_dim], y_type; may equal x (in place)
    const void* positions = nullptr;  // [n_tokens], positions_type; absolute 0-based positions
    const float* inv_freq = nullptr;  // [rot_dim / 2], from rope_inv_freq()
    int64_t n_tokens = 0, n_heads = 1, head_dim = 0, rot_dim = 0;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    float attention_factor = 1.0f;    // multiplies cos and sin
    RopePairing pairing = RopePairing::interleaved;
    RopeSlice slice = RopeSlice::last;
    bool inverse = false;
    DType x_type = DType::f32;        // f32 | bf16
    DType y_type = DType::f32;        // f32 | bf16
    DType positions_type = DType::i64;  // i64 | i32
};

// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const RopeParams& p);
// Nothing to read: no index array to check (positions are not range-checked: every value is a position).
inline Status check_indices(const RopeParams&) { return Status::ok(); }

// c_i and s_i of one position (the angle rule above): the single definition every backend calls.
void rope_cos_sin(int64_t position, const float* inv_freq, int64_t n_freq, float attention_factor,
                  float* cos_out, float* sin_out);  // inv_freq, cos_out, sin_out: [n_freq]

}  // namespace sieve

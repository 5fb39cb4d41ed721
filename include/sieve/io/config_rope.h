// RoPE as the model configs describe it: the frequency table (θ, rotated width, optional YaRN) and
// where it is applied (which slice of the vector, which pairing). One RopeConfig per rotation path
// of a layer. The RoPE op (ops/rope.h, a layer above io) takes these values as its
// RopeFrequencyConfig / RopeParams: slice → RopeSlice, pairing neox → RopePairing::half_split.
// The names carry "Config" so that models can include both headers.
#pragma once

#include <cstdint>
#include <optional>

namespace sieve {

// Which elements form a rotated pair.
enum class RopeConfigPairing {
    interleaved,  // GPT-J: pairs (2i, 2i+1) of the rotated slice (is_neox_style = false)
    neox,         // half-split: pairs (i, i + r/2) of the rotated slice (rotate_half)
};

// Where the rotated slice of width r sits inside the vector it is applied to (n dims).
enum class RopeConfigSlice {
    first,  // dims [0, r)
    last,   // dims [n − r, n)
};

const char* rope_config_pairing_name(RopeConfigPairing pairing);  // "interleaved" / "neox"
const char* rope_config_slice_name(RopeConfigSlice slice);        // "first" / "last"

// YaRN frequency interpolation and cos/sin magnitude (deepseek_v4.md §2.3, dsa_mla.md §2.2).
struct RopeYarnConfig {
    double  factor = 1.0;                          // s: interpolation factor (≥ 1)
    int64_t original_max_position_embeddings = 0;  // L0 of the correction range
    double  beta_fast = 32.0;                      // correction-range bounds (YaRN defaults)
    double  beta_slow = 1.0;
    bool    truncate = true;                       // floor/ceil the correction range (dsa_mla.md §2.2)
    // Magnitude applied to cos and sin: `attention_factor` when the config gives it, else
    // m(s, mscale) / m(s, mscale_all_dim) when both are nonzero, else m(s, 1), with
    // m(s, k) = 0.1·k·ln(s) + 1 (dsa_mla.md "Decisions for sieve", V3.2). DeepSeek-V4's original
    // layout gets 1.0 instead (deepseek_v4.md §1.4).
    double attention_factor = 1.0;
    std::optional<double> mscale;          // as written; used by the rule above
    std::optional<double> mscale_all_dim;  // as written; also enters the DSA softmax scale (dsa_mla.md §2.3)
};

struct RopeConfig {
    double            theta = 10000.0;   // base: inv_freq[i] = theta^(−2i/r), i < r/2; always > 1
    int64_t           rotated_dims = 0;  // r, even, ≥ 2
    RopeConfigSlice   slice = RopeConfigSlice::last;
    RopeConfigPairing pairing = RopeConfigPairing::interleaved;
    std::optional<RopeYarnConfig> yarn;  // absent: plain RoPE
};

// The YaRN correction range over the r/2 frequency indices (deepseek_v4.md §2.3), the same formula
// as ops/rope.h's rope_yarn_range (io validates configs with it and cannot call ops):
//   corr(n) = r · ln(L0 / (2π·n)) / (2 · ln θ)
//   low = max(⌊corr(beta_fast)⌋, 0), high = min(⌈corr(beta_slow)⌉, r − 1)  (no ⌊⌋/⌈⌉ if !truncate)
//   high += 0.001 when low == high.
// Requires rope.yarn (the parsers guarantee θ > 1 and a finite range for every YaRN table).
struct RopeConfigYarnRange {
    double low = 0.0;
    double high = 0.0;
};
RopeConfigYarnRange rope_config_yarn_range(const RopeConfig& rope);

}  // namespace sieve

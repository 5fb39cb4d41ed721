// A layer's RoPE table (ops/rope.h rope_inv_freq) from its config: θ, and YaRN when the config scales
// it (deepseek_v4.md §2.3, dsa_mla.md §2.2, qsa.md §4.1), computed once at load and uploaded to the
// backend. The one place a family turns an io RopeConfig into the op's frequency config.
#pragma once

#include <cstdint>
#include <string_view>

#include "sieve/io/config_rope.h"
#include "models/device_tensor.h"

namespace sieve {

struct RopeTable {
    DeviceTensor inv_freq;         // [rot_dim / 2] f32
    float attention_factor = 1.0f;  // YaRN's cos/sin magnitude (RopeYarnConfig::attention_factor); 1 without YaRN
};

// The table of `rot_dim` rotated dims; `what` names the layer in errors.
Expected<RopeTable> make_rope_table(Backend& backend, const RopeConfig& rope, int64_t rot_dim, std::string_view what);

}  // namespace sieve

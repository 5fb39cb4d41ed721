#include "models/rope_table.h"

#include <vector>

#include <fmt/format.h>

#include "sieve/ops/rope.h"

namespace sieve {

Expected<RopeTable> make_rope_table(Backend& backend, const RopeConfig& rope, int64_t rot_dim, std::string_view what) {
    RopeFrequencyConfig f;
    f.rot_dim = rot_dim;
    f.base = rope.theta;
    RopeTable table;
    if (rope.yarn) {
        const RopeYarnConfig& y = *rope.yarn;
        f.yarn = true;
        f.yarn_params.factor = y.factor;
        f.yarn_params.original_max_position = static_cast<double>(y.original_max_position_embeddings);
        f.yarn_params.beta_fast = y.beta_fast;
        f.yarn_params.beta_slow = y.beta_slow;
        f.yarn_params.truncate = y.truncate;
        table.attention_factor = static_cast<float>(y.attention_factor);
    }
    std::vector<float> inv_freq(static_cast<size_t>(rot_dim / 2));
    if (Status s = rope_inv_freq(f, inv_freq.data()); !s.is_ok())
        return s.with_context(fmt::format("{} RoPE table", what));
    SIEVE_ASSIGN_OR_RETURN(table.inv_freq, DeviceTensor::upload_f32(backend, inv_freq, fmt::format("{} RoPE table", what)));
    return table;
}

}  // namespace sieve

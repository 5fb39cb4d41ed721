#include "naive_reference.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace sieve::model_test {

namespace {

using Vec = std::vector<double>;

// y = W·x for W [out, in] row-major (f32 weights, double math).
Vec matvec(const std::vector<float>& w, int64_t out, int64_t in, const double* x) {
    Vec y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += static_cast<double>(w[static_cast<size_t>(o * in + i)]) * x[i];
        y[static_cast<size_t>(o)] = s;
    }
    return y;
}

void rms_norm(double* v, int64_t n, const std::vector<float>& g, double eps) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += v[i] * v[i];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv * g[static_cast<size_t>(i)];
}

}  // namespace

NaiveLayer::NaiveLayer(const DsaMlaConfig& c, const std::vector<HostTensor>& weights, int64_t layer)
    : c_(c), layer_(layer) {
    const std::string prefix = fmt::format("model.layers.{}.self_attn.", layer);
    for (const HostTensor& t : weights)
        if (t.name.rfind(prefix, 0) == 0) weights_[t.name.substr(prefix.size())] = t.f32();
    // The YaRN table written out from dsa_mla.md §2.2 ("Decisions for sieve", V3.2), in double.
    const int64_t d = c.qk_rope_head_dim;
    const double theta = c.rope_mla.theta;
    for (int64_t i = 0; i < d / 2; ++i) inv_freq_.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
    if (c.rope_mla.yarn) {
        const RopeYarnConfig& y = *c.rope_mla.yarn;
        auto corr = [&](double n) {
            return static_cast<double>(d) * std::log(static_cast<double>(y.original_max_position_embeddings) / (2 * std::numbers::pi * n)) /
                   (2 * std::log(theta));
        };
        double low = std::max(std::floor(corr(y.beta_fast)), 0.0), high = std::min(std::ceil(corr(y.beta_slow)), static_cast<double>(d - 1));
        if (low == high) high += 0.001;
        for (int64_t i = 0; i < d / 2; ++i) {
            const double r = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
            inv_freq_[static_cast<size_t>(i)] = inv_freq_[static_cast<size_t>(i)] * (1 - r) + inv_freq_[static_cast<size_t>(i)] / y.factor * r;
        }
        attention_factor_ = y.attention_factor;
    }
}

const std::vector<float>& NaiveLayer::w(const std::string& leaf) const {
    auto it = weights_.find(leaf);
    EXPECT_NE(it, weights_.end()) << "naive reference: no weight " << leaf << " in layer " << layer_;
    static const std::vector<float> empty;
    return it == weights_.end() ? empty : it->second;
}

std::vector<float> NaiveLayer::forward(std::span<const float> x_in, const std::vector<std::vector<int32_t>>& selected) const {
    const int64_t D = c_.hidden_size, H = c_.num_attention_heads, Rq = c_.q_lora_rank, R = c_.kv_lora_rank;
    const int64_t Dr = c_.qk_rope_head_dim, Dn = c_.qk_nope_head_dim, Dv = c_.v_head_dim, Dqk = Dn + Dr;
    const int64_t T = static_cast<int64_t>(x_in.size()) / D;
    // Interleaved RoPE pairs (2i, 2i + 1) of a Dr slice at position p (§2.2, MLA slice).
    auto rope = [&](double* v, int64_t p) {
        for (int64_t i = 0; i < Dr / 2; ++i) {
            const double a = static_cast<double>(p) * inv_freq_[static_cast<size_t>(i)];
            const double cs = std::cos(a) * attention_factor_, sn = std::sin(a) * attention_factor_;
            const double x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = x0 * cs - x1 * sn;
            v[2 * i + 1] = x0 * sn + x1 * cs;
        }
    };
    std::vector<Vec> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T)), xs(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        Vec x(x_in.begin() + t * D, x_in.begin() + (t + 1) * D);
        xs[static_cast<size_t>(t)] = x;
        Vec qc = matvec(w("q_a_proj.weight"), Rq, D, x.data());
        rms_norm(qc.data(), Rq, w("q_a_layernorm.weight"), c_.latent_norm_eps);
        Vec ckv = matvec(w("kv_a_proj_with_mqa.weight"), R + Dr, D, x.data());
        rms_norm(ckv.data(), R, w("kv_a_layernorm.weight"), c_.latent_norm_eps);
        rope(ckv.data() + R, t);
        Vec qt = matvec(w("q_b_proj.weight"), H * Dqk, Rq, qc.data());
        for (int64_t h = 0; h < H; ++h) rope(qt.data() + h * Dqk + Dn, t);
        const Vec kv = matvec(w("kv_b_proj.weight"), H * (Dn + Dv), R, ckv.data());
        Vec kt(static_cast<size_t>(H * Dqk)), vt(static_cast<size_t>(H * Dv));
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < Dn; ++i) kt[static_cast<size_t>(h * Dqk + i)] = kv[static_cast<size_t>(h * (Dn + Dv) + i)];
            for (int64_t i = 0; i < Dr; ++i) kt[static_cast<size_t>(h * Dqk + Dn + i)] = ckv[static_cast<size_t>(R + i)];
            for (int64_t i = 0; i < Dv; ++i) vt[static_cast<size_t>(h * Dv + i)] = kv[static_cast<size_t>(h * (Dn + Dv) + Dn + i)];
        }
        q[static_cast<size_t>(t)] = std::move(qt);
        k[static_cast<size_t>(t)] = std::move(kt);
        v[static_cast<size_t>(t)] = std::move(vt);
    }
    const std::vector<float>& sink = weights_.count("learnable_sink_param") ? w("learnable_sink_param") : std::vector<float>{};
    const bool gated = weights_.count("linear_gate.weight") != 0;
    std::vector<float> out(static_cast<size_t>(T * D));
    for (int64_t t = 0; t < T; ++t) {
        std::vector<int64_t> keys;
        if (selected.empty()) {
            for (int64_t u = 0; u <= t; ++u) keys.push_back(u);
        } else {
            for (int32_t u : selected[static_cast<size_t>(t)])
                if (u >= 0 && u <= t) keys.push_back(u);
        }
        Vec o(static_cast<size_t>(H * Dv), 0.0);
        for (int64_t h = 0; h < H; ++h) {
            Vec s;
            double m = sink.empty() ? -INFINITY : sink[static_cast<size_t>(h)];
            for (int64_t u : keys) {
                double dot = 0;
                for (int64_t i = 0; i < Dqk; ++i)
                    dot += q[static_cast<size_t>(t)][static_cast<size_t>(h * Dqk + i)] * k[static_cast<size_t>(u)][static_cast<size_t>(h * Dqk + i)];
                s.push_back(c_.softmax_scale * dot);
                m = std::max(m, s.back());
            }
            double den = sink.empty() ? 0.0 : std::exp(sink[static_cast<size_t>(h)] - m);
            for (double sj : s) den += std::exp(sj - m);
            for (size_t j = 0; j < keys.size(); ++j) {
                const double p = std::exp(s[j] - m) / den;
                for (int64_t i = 0; i < Dv; ++i)
                    o[static_cast<size_t>(h * Dv + i)] += p * v[static_cast<size_t>(keys[j])][static_cast<size_t>(h * Dv + i)];
            }
        }
        if (gated) {  // sigmoid gate from the attention input (§2.9): elementwise [H·Dv] or headwise [H]
            const int64_t width = static_cast<int64_t>(w("linear_gate.weight").size()) / D;
            const Vec g = matvec(w("linear_gate.weight"), width, D, xs[static_cast<size_t>(t)].data());
            for (int64_t i = 0; i < H * Dv; ++i)
                o[static_cast<size_t>(i)] *= 1.0 / (1.0 + std::exp(-g[static_cast<size_t>(width == H ? i / Dv : i)]));
        }
        const Vec y = matvec(w("o_proj.weight"), D, H * Dv, o.data());
        for (int64_t i = 0; i < D; ++i) out[static_cast<size_t>(t * D + i)] = static_cast<float>(y[static_cast<size_t>(i)]);
    }
    return out;
}

}  // namespace sieve::model_test

#include "qsa_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/weights.h"

namespace sieve::model_test {

// ---- random checkpoints ----------------------------------------------------------------------------

std::string qsa_config_json(const QsaTestConfig& c) {
    std::vector<std::string> types;
    for (const auto& t : c.layer_types) types.push_back("\"" + t + "\"");
    const std::string text = fmt::format(
        R"({{"model_type": "qwen4_exp_text", "hidden_size": {}, "num_hidden_layers": {}, "num_attention_heads": {},
  "num_key_value_heads": {}, "head_dim": {}, "rms_norm_eps": {}, "max_position_embeddings": 4096,
  "attention_bias": false,
  "rope_parameters": {{"rope_type": "default", "rope_theta": {}, "partial_rotary_factor": {}, "mrope_interleaved": true,
                      "mrope_section": [1, 1, 1]}},
  "indexer_n_heads": {}, "indexer_kv_heads": 1, "indexer_head_dim": {}, "indexer_budget": {},
  "indexer_compress_ratio": {}, "layer_types": [{}], "mtp_num_hidden_layers": {}}})",
        c.hidden, c.layer_types.size(), c.heads, c.kv_heads, c.head_dim, c.eps, c.theta, c.partial_rotary,
        c.index_heads, c.index_dim, c.budget, c.ratio, fmt::join(types, ", "), c.mtp_layers);
    if (!c.multimodal) return text;
    return fmt::format(R"({{"model_type": "qwen4_exp", "text_config": {}}})", text);
}

std::map<std::string, Tensor> qsa_random_weights(const QsaTestConfig& c, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::map<std::string, Tensor> w;
    auto add = [&](const std::string& name, Shape shape, float stddev) {
        Tensor t = Tensor::zeros_or_die(DType::f32, shape);
        for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = stddev * normal(rng);
        w.emplace(name, std::move(t));
    };
    const int64_t H = c.hidden, D = c.head_dim, Di = c.index_dim;
    const float s = 1.0f / std::sqrt(static_cast<float>(H));
    const size_t n_main = c.layer_types.size();
    for (size_t l = 0; l < n_main + static_cast<size_t>(c.mtp_layers); ++l) {
        if (l < n_main && c.layer_types[l] == "linear_attention") continue;
        const std::string p = l < n_main ? fmt::format("model.layers.{}.self_attn.", l)
                                         : fmt::format("mtp.layers.{}.self_attn.", l - n_main);  // qsa.md §3
        add(p + "q_proj.weight", {2 * c.heads * D, H}, s);
        add(p + "k_proj.weight", {c.kv_heads * D, H}, s);
        add(p + "v_proj.weight", {c.kv_heads * D, H}, s);
        add(p + "o_proj.weight", {H, c.heads * D}, 1.0f / std::sqrt(static_cast<float>(c.heads * D)));
        add(p + "q_norm.weight", {D}, 0.2f);
        add(p + "k_norm.weight", {D}, 0.2f);
        add(p + "indexer.index_qk_proj.weight", {(c.index_heads + 1) * Di, H}, s);
        add(p + "indexer.q_layernorm.weight", {Di}, 0.2f);
        add(p + "indexer.k_layernorm.weight", {Di}, 0.2f);
    }
    return w;
}

namespace {

bool is_fp8_candidate(const std::string& name, const Tensor& t) {
    return t.rank() == 2 && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
}

// The checkpoint's FP8 form of a weight: scale = amax / 448 per 128×128 block.
Fp8Blocks fp8_quantize(const Tensor& w) {
    return fp8_blocks({w.as<float>(), static_cast<size_t>(w.numel())}, w.dim(0), w.dim(1), Fp8Scale::amax_over_448);
}

std::string stored_name(const QsaTestConfig& c, const std::string& canonical) {
    if (!c.multimodal) return canonical;
    return "model.language_model." + canonical.substr(std::string("model.").size());
}

}  // namespace

std::map<std::string, Tensor> qsa_fp8_roundtrip(const std::map<std::string, Tensor>& weights) {
    std::map<std::string, Tensor> out;
    for (const auto& [name, t] : weights) {
        Tensor copy = Tensor::zeros_or_die(DType::f32, t.shape());
        if (is_fp8_candidate(name, t)) {
            const Fp8Blocks q = fp8_quantize(t);
            std::memcpy(copy.data(), q.dequantized.data(), t.nbytes());
        } else {
            std::memcpy(copy.data(), t.data(), t.nbytes());
        }
        out.emplace(name, std::move(copy));
    }
    return out;
}

Expected<std::unique_ptr<Checkpoint>> qsa_checkpoint(const QsaTestConfig& c, const std::map<std::string, Tensor>& weights,
                                                     StoredAs stored) {
    std::vector<HostTensor> tensors;
    for (const auto& [name, t] : weights) {
        const std::string out_name = stored_name(c, name);
        const auto* data = static_cast<const uint8_t*>(t.data());
        if (stored == StoredAs::fp8_block && is_fp8_candidate(name, t)) {
            Fp8Blocks q = fp8_quantize(t);
            tensors.push_back({out_name, DType::f8_e4m3, t.shape(), std::move(q.values)});
            tensors.push_back(HostTensor::from_f32(out_name.substr(0, out_name.size() - 7) + ".weight_scale_inv",
                                                   q.scale_shape, q.scales));
        } else if (stored == StoredAs::bf16) {
            std::vector<uint8_t> b(static_cast<size_t>(t.numel()) * 2);
            for (int64_t i = 0; i < t.numel(); ++i) {
                const uint16_t v = f32_to_bf16(t.as<float>()[i]);
                std::memcpy(b.data() + i * 2, &v, 2);
            }
            tensors.push_back({out_name, DType::bf16, t.shape(), std::move(b)});
        } else {
            tensors.push_back({out_name, DType::f32, t.shape(), std::vector<uint8_t>(data, data + t.nbytes())});
        }
    }
    return memory_checkpoint(tensors, "<qsa test checkpoint>");
}

// ---- requests and schedules ------------------------------------------------------------------------

std::vector<GoldenRunRequest> RandomRequests::requests() const {
    std::vector<GoldenRunRequest> out;
    for (size_t r = 0; r < n_tokens.size(); ++r) {
        GoldenRunRequest g;
        g.n_tokens = n_tokens[r];
        for (const std::vector<float>& x : inputs[r]) g.inputs.emplace_back(x);
        out.push_back(std::move(g));
    }
    return out;
}

RandomRequests random_requests(const std::vector<int64_t>& lengths, int64_t n_layers, int64_t hidden, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    RandomRequests out;
    for (int64_t n : lengths) {
        out.n_tokens.push_back(n);
        out.inputs.emplace_back();
        for (int64_t l = 0; l < n_layers; ++l) {
            std::vector<float> x(static_cast<size_t>(n * hidden));
            for (float& v : x) v = normal(rng);
            out.inputs.back().push_back(std::move(x));
        }
    }
    return out;
}

std::vector<int32_t> valid_entries(const SelectionRecord& s) {
    std::vector<int32_t> v;
    for (int32_t i : s.selected)
        if (i >= 0) v.push_back(i);
    return v;
}

GoldenSchedule qsa_schedule(const std::string& name, const std::vector<int64_t>& n_tokens) {
    const bool mixed = name.rfind("mixed:", 0) == 0;
    auto s = golden_schedule(mixed ? "mixed" : name, n_tokens, mixed ? std::stoull(name.substr(6)) : 1);
    if (!s) {
        ADD_FAILURE() << s.status().to_string();
        return {};
    }
    s->name = name;
    if (mixed) s->engine.scheduler.max_tokens_per_step = 7;
    return std::move(*s);
}

// ---- the double-precision reference ---------------------------------------------------------------

Expected<ReferenceWeights> reference_weights(const Checkpoint& checkpoint, const ModelConfig& config, int64_t layer) {
    const QsaConfig& c = *config.qsa();
    WeightStore store(checkpoint, WeightFamily::qsa);
    const WeightScope s = store.scope(fmt::format("model.layers.{}.self_attn", layer));
    ReferenceWeights w;
    auto get = [&](const char* leaf, Shape shape, std::vector<double>& out) -> Status {
        SIEVE_ASSIGN_OR_RETURN(Tensor t, s.get(leaf, shape, kWeightFloatOrFp8DTypes, DType::f32));
        out.assign(t.as<float>(), t.as<float>() + t.numel());
        return Status::ok();
    };
    const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
    const int64_t Hi = c.indexer_n_heads, Di = c.indexer_head_dim;
    SIEVE_RETURN_IF_ERROR(get("q_proj.weight", {2 * Hq * D, H}, w.q_proj));
    SIEVE_RETURN_IF_ERROR(get("k_proj.weight", {Hkv * D, H}, w.k_proj));
    SIEVE_RETURN_IF_ERROR(get("v_proj.weight", {Hkv * D, H}, w.v_proj));
    SIEVE_RETURN_IF_ERROR(get("o_proj.weight", {H, Hq * D}, w.o_proj));
    SIEVE_RETURN_IF_ERROR(get("indexer.index_qk_proj.weight", {(Hi + 1) * Di, H}, w.index_qk_proj));
    SIEVE_RETURN_IF_ERROR(get("q_norm.weight", {D}, w.q_norm));
    SIEVE_RETURN_IF_ERROR(get("k_norm.weight", {D}, w.k_norm));
    SIEVE_RETURN_IF_ERROR(get("indexer.q_layernorm.weight", {Di}, w.index_q_norm));
    SIEVE_RETURN_IF_ERROR(get("indexer.k_layernorm.weight", {Di}, w.index_k_norm));
    return w;
}

namespace {

// y[o] = Σ_i W[o, i]·x[i]
std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x, int64_t out) {
    const int64_t in = static_cast<int64_t>(x.size());
    std::vector<double> y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) y[static_cast<size_t>(o)] += W[static_cast<size_t>(o * in + i)] * x[static_cast<size_t>(i)];
    return y;
}

// Gemma RMSNorm (1 + w) over v[off, off + n) in place (qsa.md §4.1).
void gemma_norm(std::vector<double>& v, int64_t off, int64_t n, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += v[static_cast<size_t>(off + i)] * v[static_cast<size_t>(off + i)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(off + i)] *= inv * (1.0 + w[static_cast<size_t>(i)]);
}

// NeoX rotation of the first R dims of v[off, …) at position p, pairs (i, i + R/2) (qsa.md §4.1).
void rope(std::vector<double>& v, int64_t off, int64_t R, double theta, int64_t p) {
    for (int64_t i = 0; i < R / 2; ++i) {
        const double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(R));
        const double a = static_cast<double>(p) * f, cs = std::cos(a), sn = std::sin(a);
        double& x1 = v[static_cast<size_t>(off + i)];
        double& x2 = v[static_cast<size_t>(off + i + R / 2)];
        const double y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
        x1 = y1;
        x2 = y2;
    }
}

struct Projected {
    std::vector<std::vector<double>> q, gate, k, v, iq, kraw;  // per token
};

Projected project(const QsaConfig& c, const ReferenceWeights& w, const float* x, int64_t T) {
    const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
    const int64_t Hi = c.indexer_n_heads, Di = c.indexer_head_dim, R = c.rotary_dim;
    Projected pr;
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> xt(x + t * H, x + (t + 1) * H);
        const std::vector<double> qg = matvec(w.q_proj, xt, 2 * Hq * D);
        std::vector<double> q(static_cast<size_t>(Hq * D)), gate(static_cast<size_t>(Hq * D));
        for (int64_t h = 0; h < Hq; ++h)
            for (int64_t i = 0; i < D; ++i) {  // per head [q_h ‖ gate_h] (§3)
                q[static_cast<size_t>(h * D + i)] = qg[static_cast<size_t>(h * 2 * D + i)];
                gate[static_cast<size_t>(h * D + i)] = qg[static_cast<size_t>(h * 2 * D + D + i)];
            }
        std::vector<double> k = matvec(w.k_proj, xt, Hkv * D), v = matvec(w.v_proj, xt, Hkv * D);
        const std::vector<double> iqk = matvec(w.index_qk_proj, xt, (Hi + 1) * Di);
        std::vector<double> iq(iqk.begin(), iqk.begin() + Hi * Di), kraw(iqk.begin() + Hi * Di, iqk.end());
        for (int64_t h = 0; h < Hq; ++h) {
            gemma_norm(q, h * D, D, w.q_norm, c.rms_norm_eps);
            rope(q, h * D, R, c.rope.theta, t);
        }
        for (int64_t g = 0; g < Hkv; ++g) {
            gemma_norm(k, g * D, D, w.k_norm, c.rms_norm_eps);
            rope(k, g * D, R, c.rope.theta, t);
        }
        for (int64_t h = 0; h < Hi; ++h) {
            gemma_norm(iq, h * Di, Di, w.index_q_norm, c.rms_norm_eps);
            rope(iq, h * Di, R, c.rope.theta, t);  // the main table on the first R dims of Di (§4.2)
        }
        pr.q.push_back(q);
        pr.gate.push_back(gate);
        pr.k.push_back(k);
        pr.v.push_back(v);
        pr.iq.push_back(iq);
        pr.kraw.push_back(kraw);
    }
    return pr;
}

// Gated GQA of token t over `tokens`, then o_proj (§4.7, §4.8).
std::vector<double> attend(const QsaConfig& c, const ReferenceWeights& w, const Projected& pr, int64_t t,
                           const std::set<int32_t>& tokens) {
    const int64_t Hq = c.num_attention_heads, D = c.head_dim, G = c.gqa_group_size;
    std::vector<double> y(static_cast<size_t>(Hq * D), 0.0);
    for (int64_t h = 0; h < Hq; ++h) {
        const int64_t g = h / G;
        std::vector<double> logits;
        for (int32_t j : tokens) {
            double d = 0;
            for (int64_t i = 0; i < D; ++i)
                d += pr.q[static_cast<size_t>(t)][static_cast<size_t>(h * D + i)] * pr.k[static_cast<size_t>(j)][static_cast<size_t>(g * D + i)];
            logits.push_back(d * c.softmax_scale);
        }
        const double m = *std::max_element(logits.begin(), logits.end());
        double denom = 0;
        for (double& l : logits) denom += (l = std::exp(l - m));
        size_t n = 0;
        for (int32_t j : tokens) {
            for (int64_t i = 0; i < D; ++i)
                y[static_cast<size_t>(h * D + i)] += logits[n] / denom * pr.v[static_cast<size_t>(j)][static_cast<size_t>(g * D + i)];
            ++n;
        }
        for (int64_t i = 0; i < D; ++i)
            y[static_cast<size_t>(h * D + i)] *= 1.0 / (1.0 + std::exp(-pr.gate[static_cast<size_t>(t)][static_cast<size_t>(h * D + i)]));
    }
    return matvec(w.o_proj, y, c.hidden_size);
}

}  // namespace

ReferenceResult reference_layer(const QsaConfig& c, const ReferenceWeights& w, const float* x, int64_t T) {
    const Projected pr = project(c, w, x, T);
    const int64_t r = c.indexer_compress_ratio, Hi = c.indexer_n_heads, Di = c.indexer_head_dim, R = c.rotary_dim;
    const int64_t k_top = c.block_topk;
    ReferenceResult res;
    for (int64_t t = 0; t < T; ++t) {
        ReferenceToken tok;
        const int64_t visible = (t + 1) / r;  // complete groups, the just-completed one included (§4.5)
        std::vector<int64_t> groups;
        if (visible <= k_top) {
            for (int64_t g = 0; g < visible; ++g) groups.push_back(g);
        } else {
            for (int64_t g = 0; g < visible; ++g) {
                // mean → k_layernorm → RoPE at the first position (§4.3), re-pooled per query.
                std::vector<double> kc(static_cast<size_t>(Di), 0.0);
                for (int64_t j = 0; j < r; ++j)
                    for (int64_t i = 0; i < Di; ++i) kc[static_cast<size_t>(i)] += pr.kraw[static_cast<size_t>(g * r + j)][static_cast<size_t>(i)];
                for (double& v : kc) v /= static_cast<double>(r);
                gemma_norm(kc, 0, Di, w.index_k_norm, c.rms_norm_eps);
                rope(kc, 0, R, c.rope.theta, g * r);
                double s = 0;
                for (int64_t h = 0; h < Hi; ++h) {
                    double d = 0;
                    for (int64_t i = 0; i < Di; ++i) d += pr.iq[static_cast<size_t>(t)][static_cast<size_t>(h * Di + i)] * kc[static_cast<size_t>(i)];
                    s += std::max(d, 0.0);  // ReLU per head, then the sum (§4.4)
                }
                tok.scores.push_back(s / std::sqrt(static_cast<double>(Di)));
            }
            std::vector<int64_t> order(static_cast<size_t>(visible));
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                return tok.scores[static_cast<size_t>(a)] > tok.scores[static_cast<size_t>(b)];
            });
            const double kth = tok.scores[static_cast<size_t>(order[static_cast<size_t>(k_top - 1)])];
            const double next = tok.scores[static_cast<size_t>(order[static_cast<size_t>(k_top)])];
            double max_abs = 0;
            for (double s : tok.scores) max_abs = std::max(max_abs, std::fabs(s));
            // Near ties (golden_format.md "Exact score ties"): fp32 and double may order them either
            // way. Exact zeros on both sides (the ReLU's) are not: every implementation here takes
            // the lower group.
            tok.boundary_tie = kth - next <= 1e-5 * max_abs && !(kth == 0.0 && next == 0.0);
            groups.assign(order.begin(), order.begin() + k_top);
        }
        for (int64_t g : groups)
            for (int64_t j = 0; j < r; ++j) tok.tokens.insert(static_cast<int32_t>(g * r + j));
        for (int64_t p = visible * r; p <= t; ++p) tok.tokens.insert(static_cast<int32_t>(p));  // open tail (§4.6)
        const std::vector<double> out = attend(c, w, pr, t, tok.tokens);
        res.out.insert(res.out.end(), out.begin(), out.end());
        res.tokens.push_back(std::move(tok));
    }
    return res;
}

std::vector<double> reference_dense_layer(const QsaConfig& c, const ReferenceWeights& w, const float* x, int64_t T) {
    const Projected pr = project(c, w, x, T);
    std::vector<double> out;
    for (int64_t t = 0; t < T; ++t) {
        std::set<int32_t> all;
        for (int64_t p = 0; p <= t; ++p) all.insert(static_cast<int32_t>(p));
        const std::vector<double> o = attend(c, w, pr, t, all);
        out.insert(out.end(), o.begin(), o.end());
    }
    return out;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want, int64_t hidden,
                      const std::vector<int64_t>& rows) {
    if (rows.empty()) return output_diff(got, want).rel;
    std::vector<float> got_rows;
    std::vector<double> want_rows;
    for (int64_t t : rows) {
        got_rows.insert(got_rows.end(), got.begin() + t * hidden, got.begin() + (t + 1) * hidden);
        want_rows.insert(want_rows.end(), want.begin() + t * hidden, want.begin() + (t + 1) * hidden);
    }
    return output_diff(got_rows, want_rows).rel;
}

}  // namespace sieve::model_test

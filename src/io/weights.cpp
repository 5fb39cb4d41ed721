#include "io/weights.h"

#include <algorithm>
#include <cmath>

#include "core/assert.h"
#include "core/thread_pool.h"

namespace sieve {
namespace {

// ---- alias rules, one table per family ---------------------------------------------------------

constexpr WeightNameAlias kDeepseekV4Aliases[] = {
    // transformers save_pretrained writes model.layers.N.attn.* (deepseek_v4.md "Decisions for sieve", §6).
    {"", "model", true},
    // ... and saves the main KV norm as attn.norm.weight (deepseek_v4.md "Decisions for sieve").
    {"attn.kv_norm", "attn.norm", false},
};

constexpr WeightNameAlias kDsaMlaAliases[] = {
    // Hy4 output gate: transformers' module name (dsa_mla.md "Decisions for sieve: Checkpoint names", §6.2).
    {"self_attn.linear_gate", "self_attn.gate_proj", false},
    // ... and the alias SGLang accepts (dsa_mla.md §6.2).
    {"self_attn.linear_gate", "self_attn.g_proj", false},
    // Hy4 learnable sink: transformers' module name (dsa_mla.md "Decisions for sieve: Sink", §6.2).
    {"self_attn.learnable_sink_param", "self_attn.sinks", false},
};

constexpr WeightNameAlias kQsaAliases[] = {
    // Multimodal checkpoints (Qwen4ExpForConditionalGeneration) nest the text model (qsa.md §3).
    {"model", "model.language_model", true},
};

std::vector<std::string_view> split_segments(std::string_view s) {
    std::vector<std::string_view> out;
    if (s.empty()) return out;
    size_t start = 0;
    for (;;) {
        const size_t dot = s.find('.', start);
        out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (dot == std::string_view::npos) return out;
        start = dot + 1;
    }
}

std::string join_segments(const std::vector<std::string_view>& segs) {
    std::string out;
    for (size_t i = 0; i < segs.size(); ++i) {
        if (i) out += '.';
        out += segs[i];
    }
    return out;
}

// `name` with every occurrence of the rule's segments replaced; nullopt if none occurs.
std::optional<std::string> apply_alias(std::string_view name, const WeightNameAlias& rule) {
    if (rule.canonical.empty()) {
        SIEVE_ASSERT(rule.at_start, "an empty alias pattern only makes sense as a prefix");
        return name.empty() ? std::string(rule.alias) : std::string(rule.alias) + "." + std::string(name);
    }
    const auto segs = split_segments(name);
    const auto pattern = split_segments(rule.canonical);
    const auto replacement = split_segments(rule.alias);
    std::vector<std::string_view> out;
    bool matched = false;
    size_t i = 0;
    while (i < segs.size()) {
        const bool may_match = !rule.at_start || i == 0;
        if (may_match && i + pattern.size() <= segs.size() &&
            std::equal(pattern.begin(), pattern.end(), segs.begin() + static_cast<ptrdiff_t>(i))) {
            out.insert(out.end(), replacement.begin(), replacement.end());
            i += pattern.size();
            matched = true;
        } else {
            out.push_back(segs[i++]);
        }
    }
    if (!matched) return std::nullopt;
    return join_segments(out);
}

std::string join_names(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

std::string_view strip_weight_suffix(std::string_view name) {
    constexpr std::string_view kSuffix = ".weight";
    if (name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix)
        return name.substr(0, name.size() - kSuffix.size());
    return {};
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a ≥ 0, b > 0; no overflow

bool shape_matches(std::span<const int64_t> actual, const Shape& expected) {
    if (actual.size() != expected.size()) return false;
    for (size_t i = 0; i < actual.size(); ++i)
        if (expected[i] != -1 && expected[i] != actual[i]) return false;
    return true;
}

std::string expected_shape_string(const Shape& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += shape[i] == -1 ? std::string("?") : std::to_string(shape[i]);
    }
    return s + "]";
}

}  // namespace

// ---- families and names ----------------------------------------------------------------------------

std::string_view weight_family_name(WeightFamily family) {
    switch (family) {
        case WeightFamily::deepseek_v4: return "deepseek_v4";
        case WeightFamily::dsa_mla: return "dsa_mla";
        case WeightFamily::qsa: return "qsa";
    }
    return "?";
}

std::optional<WeightFamily> weight_family_for_model_type(std::string_view model_type) {
    if (model_type == "deepseek_v4") return WeightFamily::deepseek_v4;
    if (model_type == "deepseek_v32" || model_type == "hy_v4") return WeightFamily::dsa_mla;
    if (model_type == "qwen4_exp" || model_type == "qwen4_exp_text") return WeightFamily::qsa;
    return std::nullopt;
}

std::span<const WeightNameAlias> weight_name_aliases(WeightFamily family) {
    switch (family) {
        case WeightFamily::deepseek_v4: return kDeepseekV4Aliases;
        case WeightFamily::dsa_mla: return kDsaMlaAliases;
        case WeightFamily::qsa: return kQsaAliases;
    }
    return {};
}

std::vector<std::string> weight_name_candidates(WeightFamily family, std::string_view canonical) {
    std::vector<std::string> out{std::string(canonical)};
    for (const WeightNameAlias& rule : weight_name_aliases(family)) {
        const size_t n = out.size();
        for (size_t i = 0; i < n; ++i) {
            auto alt = apply_alias(out[i], rule);
            if (alt && std::find(out.begin(), out.end(), *alt) == out.end()) out.push_back(std::move(*alt));
        }
    }
    return out;
}

std::string DTypeSet::to_string() const {
    std::string out;
    for (DType t : kAllDTypes) {
        if (!contains(t)) continue;
        if (!out.empty()) out += ", ";
        out += dtype_name(t);
    }
    return out.empty() ? std::string("(none)") : out;
}

// ---- FP8 ---------------------------------------------------------------------------------------------

Expected<Tensor> fp8_block_dequantize(const Fp8BlockWeight& w, DType out) {
    if (out != DType::f32 && out != DType::bf16)
        return invalid_argument_error("tensor {}: FP8 dequantization writes f32 or bf16, not {}", w.weight_name,
                                      dtype_name(out));
    if (w.rows < 0 || w.cols < 0 || w.block_rows <= 0 || w.block_cols <= 0 ||
        (w.cols > 0 && w.rows > static_cast<int64_t>(w.weight.size()) / w.cols) ||
        static_cast<uint64_t>(w.rows * w.cols) != w.weight.size())
        return invalid_argument_error("tensor {}: {} FP8 bytes for shape [{}, {}] with blocks {}×{}", w.weight_name,
                                      w.weight.size(), w.rows, w.cols, w.block_rows, w.block_cols);
    const int64_t scale_rows = ceil_div(w.rows, w.block_rows), scale_cols = ceil_div(w.cols, w.block_cols);
    if (w.scale.dtype() != DType::f32 || w.scale.rank() != 2 || w.scale.dim(0) != scale_rows ||
        w.scale.dim(1) != scale_cols)
        return invalid_argument_error("tensor {}: scale is {} {}, expected f32 [{}, {}]", w.scale_name,
                                      dtype_name(w.scale.dtype()), shape_to_string(w.scale.shape()), scale_rows,
                                      scale_cols);
    SIEVE_ASSIGN_OR_RETURN(Tensor result, Tensor::zeros(out, {w.rows, w.cols}));
    const uint8_t* src = w.weight.data();  // [rows, cols]
    const float* scale = w.scale.as<float>();  // [scale_rows, scale_cols]
    void* dst = result.data();  // [rows, cols]
    const int64_t rows = w.rows, cols = w.cols, br = w.block_rows, bc = w.block_cols;
    // Rows per chunk: about 64 Ki elements, below which the pool costs more than it saves.
    const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, cols));
    ThreadPool::global().parallel_for(
        rows,
        [&](int64_t r0, int64_t r1) {
            for (int64_t o = r0; o < r1; ++o) {
                const uint8_t* in = src + o * cols;
                const float* s = scale + (o / br) * scale_cols;
                for (int64_t cb = 0; cb < scale_cols; ++cb) {
                    const float m = s[cb];
                    const int64_t i1 = std::min(cols, (cb + 1) * bc);
                    if (out == DType::f32) {
                        float* y = static_cast<float*>(dst) + o * cols;
                        for (int64_t i = cb * bc; i < i1; ++i) y[i] = fp8_e4m3_to_f32(in[i]) * m;
                    } else {
                        uint16_t* y = static_cast<uint16_t*>(dst) + o * cols;
                        for (int64_t i = cb * bc; i < i1; ++i) y[i] = f32_to_bf16(fp8_e4m3_to_f32(in[i]) * m);
                    }
                }
            }
        },
        min_rows);
    return result;
}

// ---- WeightScope -------------------------------------------------------------------------------------

WeightScope WeightScope::sub(std::string_view name) const { return WeightScope(store_, canonical_name(name)); }

std::string WeightScope::canonical_name(std::string_view leaf) const {
    if (prefix_.empty()) return std::string(leaf);
    if (leaf.empty()) return prefix_;
    return prefix_ + "." + std::string(leaf);
}

Expected<bool> WeightScope::has(std::string_view leaf) const {
    auto v = store_->resolve(canonical_name(leaf));
    if (v) return true;
    if (v.status().code() == StatusCode::not_found) return false;
    return v.status();
}

Expected<SafetensorsTensorView> WeightScope::raw(std::string_view leaf) const {
    return store_->lookup(canonical_name(leaf));
}

Expected<Tensor> WeightScope::get(std::string_view leaf, const Shape& shape, DTypeSet accepted, DType out) const {
    SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView v, store_->lookup(canonical_name(leaf)));
    if (v.is_opaque())
        return unsupported_error("tensor {} (in {}): dtype {} has no sieve equivalent", v.name, v.file,
                                 v.dtype_string);
    if (!shape_matches(v.shape, shape))
        return invalid_argument_error("tensor {} (in {}): shape {}, expected {}", v.name, v.file,
                                      shape_to_string(v.shape), expected_shape_string(shape));
    const DType dtype = *v.dtype;
    if (!accepted.contains(dtype))
        return invalid_argument_error("tensor {} (in {}): dtype {}, expected {}", v.name, v.file, dtype_name(dtype),
                                      accepted.to_string());
    const bool is_weight = !strip_weight_suffix(v.name).empty();
    if (dtype == DType::f8_e4m3 && is_weight) {
        if (v.shape.size() != 2)
            return unsupported_error("tensor {} (in {}): FP8 block-scaled weights of rank {} (shape {}); rank 2 only",
                                     v.name, v.file, v.shape.size(), shape_to_string(v.shape));
        SIEVE_ASSIGN_OR_RETURN(Fp8BlockWeight w, store_->fp8_block(v, v.shape[0], v.shape[1]));
        return fp8_block_dequantize(w, out);
    }
    if (is_weight) {
        // A scale next to a non-FP8 weight would be dropped silently: refuse instead.
        SIEVE_ASSIGN_OR_RETURN(auto scale, store_->fp8_scale_sibling(v));
        if (scale)
            return corrupt_error("tensor {} (in {}): dtype {} but it has a block-scale sibling {} (in {}); only "
                                 "F8_E4M3 weights are block-scaled",
                                 v.name, v.file, dtype_name(dtype), scale->name, scale->file);
    }
    return read_tensor(v, out);
}

Expected<Fp8BlockWeight> WeightScope::get_fp8_block(std::string_view leaf, int64_t rows, int64_t cols) const {
    SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView v, store_->lookup(canonical_name(leaf)));
    if (v.is_opaque() || *v.dtype != DType::f8_e4m3)
        return invalid_argument_error("tensor {} (in {}): dtype {}, expected F8_E4M3", v.name, v.file, v.dtype_string);
    if (!shape_matches(v.shape, {rows, cols}))
        return invalid_argument_error("tensor {} (in {}): shape {}, expected {}", v.name, v.file,
                                      shape_to_string(v.shape), expected_shape_string({rows, cols}));
    return store_->fp8_block(v, v.shape[0], v.shape[1]);
}

// ---- WeightStore -------------------------------------------------------------------------------------

WeightStore::WeightStore(const Checkpoint& checkpoint, WeightFamily family, WeightStoreOptions options)
    : checkpoint_(checkpoint), family_(family), options_(options) {
    SIEVE_ASSERT(options_.fp8_block_rows > 0 && options_.fp8_block_cols > 0, "FP8 block sizes must be positive");
}

Expected<SafetensorsTensorView> WeightStore::resolve(std::string_view canonical) const {
    const std::vector<std::string> candidates = weight_name_candidates(family_, canonical);
    std::optional<SafetensorsTensorView> found;
    for (const std::string& name : candidates) {
        auto v = checkpoint_.find(name);
        if (!v) continue;
        if (found)
            return corrupt_error("tensor {} is ambiguous: checkpoint {} holds both {} (in {}) and {} (in {})",
                                 canonical, checkpoint_.path().string(), found->name, found->file, v->name, v->file);
        found = v;
    }
    if (!found) {
        if (candidates.size() == 1)
            return not_found_error("tensor {} not found in checkpoint {}", canonical, checkpoint_.path().string());
        return not_found_error("tensor {} not found in checkpoint {} (looked for {})", canonical,
                               checkpoint_.path().string(), join_names(candidates));
    }
    return *found;
}

Expected<SafetensorsTensorView> WeightStore::lookup(std::string_view canonical) {
    auto v = resolve(canonical);
    if (v)
        requested_.emplace(v->name);
    else if (v.status().code() == StatusCode::not_found)
        missing_.emplace(canonical);
    return v;
}

Expected<std::optional<SafetensorsTensorView>> WeightStore::fp8_scale_sibling(const SafetensorsTensorView& weight) const {
    const std::string_view stem = strip_weight_suffix(weight.name);
    if (stem.empty()) return std::optional<SafetensorsTensorView>();
    // "X.scale": DeepSeek's original name; "X.weight_scale_inv": HF and vLLM (deepseek_v4.md §6,
    // dsa_mla.md §3.6). Both are multipliers despite the name.
    const std::string names[] = {std::string(stem) + ".scale", std::string(stem) + ".weight_scale_inv"};
    std::optional<SafetensorsTensorView> found;
    for (const auto& name : names) {
        auto v = checkpoint_.find(name);
        if (!v) continue;
        if (found)
            return corrupt_error("tensor {} (in {}) has two block-scale siblings: {} (in {}) and {} (in {})",
                                 weight.name, weight.file, found->name, found->file, v->name, v->file);
        found = v;
    }
    return found;
}

Expected<Fp8BlockWeight> WeightStore::fp8_block(const SafetensorsTensorView& weight, int64_t rows, int64_t cols) {
    SIEVE_ASSIGN_OR_RETURN(std::optional<SafetensorsTensorView> sibling, fp8_scale_sibling(weight));
    if (!sibling) {
        const std::string_view stem = strip_weight_suffix(weight.name);
        return unsupported_error("tensor {} (in {}): F8_E4M3 weight without a block-scale sibling ({}.scale or "
                                 "{}.weight_scale_inv); unscaled or per-tensor FP8 weights are not supported",
                                 weight.name, weight.file, stem, stem);
    }
    const SafetensorsTensorView& s = *sibling;
    requested_.emplace(s.name);
    const int64_t br = options_.fp8_block_rows, bc = options_.fp8_block_cols;
    if (s.is_opaque() || (*s.dtype != DType::f8_e8m0 && *s.dtype != DType::f32))
        return invalid_argument_error("tensor {} (in {}): dtype {}, expected f8_e8m0 or f32 for the block scales of {}",
                                      s.name, s.file, s.dtype_string, weight.name);
    const Shape expected{ceil_div(rows, br), ceil_div(cols, bc)};
    if (!shape_matches(s.shape, expected))
        return invalid_argument_error("tensor {} (in {}): shape {}, expected {} for the {}×{} block scales of {} {}",
                                      s.name, s.file, shape_to_string(s.shape), shape_to_string(expected), br, bc,
                                      weight.name, shape_to_string(weight.shape));
    Fp8BlockWeight w;
    w.weight_name = std::string(weight.name);
    w.scale_name = std::string(s.name);
    w.weight = weight.bytes;
    w.rows = rows;
    w.cols = cols;
    w.block_rows = br;
    w.block_cols = bc;
    SIEVE_ASSIGN_OR_RETURN(w.scale, read_tensor(s, DType::f32));
    const float* sv = w.scale.as<float>();
    for (int64_t i = 0; i < w.scale.numel(); ++i)
        if (!std::isfinite(sv[i]))
            return corrupt_error("tensor {} (in {}): scale of block [{}, {}] is {}", s.name, s.file,
                                 i / expected[1], i % expected[1], sv[i]);
    return w;
}

std::vector<std::string> WeightStore::unrequested_tensors() const {
    std::vector<std::string> out;
    for (std::string_view name : checkpoint_.tensor_names())
        if (requested_.find(name) == requested_.end()) out.emplace_back(name);
    return out;
}

std::vector<std::string> WeightStore::missing_tensors() const { return {missing_.begin(), missing_.end()}; }

std::vector<std::string> WeightStore::requested_tensors() const { return {requested_.begin(), requested_.end()}; }

}  // namespace sieve

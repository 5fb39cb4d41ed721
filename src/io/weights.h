// Weight access for the model loaders: canonical names → checkpoint names (per-family alias
// rules), shape and dtype checks, FP8 block-scaled dequantization, and bookkeeping of which
// tensors were requested (for `sieve inspect`).
//
// Canonical names (what model code asks for):
//   deepseek_v4   the original DeepSeek names, no "model." prefix: layers.N.attn.wq_a.weight,
//                 layers.N.attn.kv_norm.weight, mtp.0.attn.* (deepseek_v4.md §6)
//   dsa_mla       the HF names of DeepSeek-V3.2 / Hy4: model.layers.N.self_attn.q_a_proj.weight,
//                 model.layers.N.self_attn.linear_gate.weight, …learnable_sink_param (dsa_mla.md §6)
//   qsa           the text-only HF names: model.layers.L.self_attn.q_proj.weight (qsa.md §3)
// A canonical name may be stored under other spellings (kWeightNameAliases in weights.cpp, one
// table per family, each rule citing its spec section). Every spelling is looked up; exactly one
// must exist. Two existing spellings of one tensor is an error (ambiguous), never a silent pick.
//
// FP8 block-scaled weights: an F8_E4M3 tensor named "X.weight" must have exactly one scale
// sibling, "X.scale" (DeepSeek original) or "X.weight_scale_inv" (HF / vLLM), next to it under
// the same resolved prefix, of dtype F8_E8M0 (2^(b−127)) or F32 (a plain multiplier; DeepSeek
// ships both: V4 e8m0 `.scale`, V3.2 f32 `.weight_scale_inv`, V4-Base f32 `.scale`), shape
// [⌈rows/128⌉, ⌈cols/128⌉] (edge blocks partial). Dequantization (deepseek_v4.md "Decisions for
// sieve" and §2.7, dsa_mla.md §3.6): W[o, i] = e4m3(W8[o, i]) · scale[⌊o/128⌋, ⌊i/128⌋].
// An F8_E4M3 "X.weight" without a scale sibling is `unsupported` (per-tensor or unscaled FP8 is
// in no spec; dequantizing it as if scaled by 1 could be silently wrong).
//
// Not thread-safe: one loader thread per WeightStore.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/safetensors.h"

namespace sieve {

enum class WeightFamily {
    deepseek_v4,  // model_type deepseek_v4
    dsa_mla,      // deepseek_v32, hy_v4
    qsa,          // qwen4_exp (and its text-only config qwen4_exp_text)
};

std::string_view weight_family_name(WeightFamily family);
std::optional<WeightFamily> weight_family_for_model_type(std::string_view model_type);

// Where the dot-separated segments `canonical` occur in a name (only as its leading segments
// when `at_start`; an empty `canonical` with `at_start` means "prepend"), the checkpoint may spell
// them `alias`.
struct WeightNameAlias {
    std::string_view canonical;
    std::string_view alias;
    bool at_start;
};
std::span<const WeightNameAlias> weight_name_aliases(WeightFamily family);

// Every spelling of `canonical` under the family's rules, canonical first. Rules apply in
// table order, each to every spelling produced so far, so they combine.
std::vector<std::string> weight_name_candidates(WeightFamily family, std::string_view canonical);

// A small set of dtypes, for "accepted dtypes" arguments: DTypeSet{DType::f32, DType::bf16}.
class DTypeSet {
public:
    constexpr DTypeSet() = default;
    constexpr DTypeSet(std::initializer_list<DType> types) {
        for (DType t : types) bits_ |= bit(t);
    }
    constexpr bool contains(DType t) const { return (bits_ & bit(t)) != 0; }
    std::string to_string() const;  // "f32, bf16"

private:
    static constexpr uint32_t bit(DType t) { return uint32_t{1} << static_cast<unsigned>(t); }
    uint32_t bits_ = 0;
};

// Float weights as checkpoints store them (transformers: fp32 / bf16 / fp16).
inline constexpr DTypeSet kWeightFloatDTypes{DType::f32, DType::bf16, DType::f16};
// The same plus FP8 e4m3 with a block-scale sibling (DeepSeek linears).
inline constexpr DTypeSet kWeightFloatOrFp8DTypes{DType::f32, DType::bf16, DType::f16, DType::f8_e4m3};

// An FP8 block-scaled weight left packed, for a kernel that consumes it directly.
struct Fp8BlockWeight {
    std::string weight_name;          // checkpoint names, for messages
    std::string scale_name;
    std::span<const uint8_t> weight;  // [rows, cols] e4m3 bytes, inside the checkpoint's mapping
    Tensor scale;                     // [⌈rows/block_rows⌉, ⌈cols/block_cols⌉] f32 multipliers
    int64_t rows = 0, cols = 0;
    int64_t block_rows = 0, block_cols = 0;
};

// W[o, i] = e4m3(weight[o, i]) · scale[o / block_rows, i / block_cols]: a [rows, cols] tensor of
// f32 or bf16 (the product rounded to nearest even). Checks w's sizes against each other.
Expected<Tensor> fp8_block_dequantize(const Fp8BlockWeight& w, DType out = DType::f32);

struct WeightStoreOptions {
    // FP8 weight block (quantization_config.weight_block_size; 128×128 in every release:
    // deepseek_v4.md §1.1, dsa_mla.md §3.6).
    int64_t fp8_block_rows = 128;
    int64_t fp8_block_cols = 128;
};

class WeightStore;

// A name prefix inside a WeightStore: store.scope("layers.3").sub("attn").get("wq_a.weight", ...).
// Cheap to copy; must not outlive its store.
class WeightScope {
public:
    WeightScope sub(std::string_view name) const;
    const std::string& prefix() const { return prefix_; }
    std::string canonical_name(std::string_view leaf) const;  // prefix + "." + leaf

    // Whether the tensor exists (under exactly one spelling); an error only if ambiguous.
    Expected<bool> has(std::string_view leaf) const;
    // The stored tensor as it is (no dtype or shape check); marks it requested.
    Expected<SafetensorsTensorView> raw(std::string_view leaf) const;
    // Checks the shape (-1 = any size) and the stored dtype against `accepted`, then converts to
    // `out` (f32, bf16, or the stored dtype). An accepted F8_E4M3 "*.weight" is dequantized with
    // its block-scale sibling (rank 2 only; `out` f32 or bf16); any other F8_E4M3 tensor is
    // decoded as it is. A non-FP8 "*.weight" with a scale sibling is an error (the scale would be
    // dropped silently).
    Expected<Tensor> get(std::string_view leaf, const Shape& shape, DTypeSet accepted,
                         DType out = DType::f32) const;
    // An FP8 block-scaled [rows, cols] weight and its scale, left packed.
    Expected<Fp8BlockWeight> get_fp8_block(std::string_view leaf, int64_t rows, int64_t cols) const;

private:
    friend class WeightStore;
    WeightScope(WeightStore* store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}

    WeightStore* store_;
    std::string prefix_;
};

class WeightStore {
public:
    WeightStore(const Checkpoint& checkpoint, WeightFamily family, WeightStoreOptions options = {});

    WeightScope root() { return WeightScope(this, ""); }
    WeightScope scope(std::string_view prefix) { return WeightScope(this, std::string(prefix)); }

    const Checkpoint& checkpoint() const { return checkpoint_; }
    WeightFamily family() const { return family_; }
    const WeightStoreOptions& options() const { return options_; }

    // The checkpoint's view of a canonical name: not_found (listing the spellings tried) or
    // corrupt (ambiguous). Does not mark anything requested.
    Expected<SafetensorsTensorView> resolve(std::string_view canonical) const;

    // Checkpoint names never returned by raw/get/get_fp8_block (scale siblings of requested FP8
    // weights count as requested), sorted: `sieve inspect`'s "unexpected tensors".
    std::vector<std::string> unrequested_tensors() const;
    // Canonical names that raw/get/get_fp8_block asked for and did not find, sorted.
    std::vector<std::string> missing_tensors() const;
    // Checkpoint names requested so far, sorted.
    std::vector<std::string> requested_tensors() const;

private:
    friend class WeightScope;
    // resolve() that records a miss in missing_.
    Expected<SafetensorsTensorView> lookup(std::string_view canonical);
    // The scale sibling of an FP8 "X.weight" (already resolved); nullopt if there is none.
    Expected<std::optional<SafetensorsTensorView>> fp8_scale_sibling(const SafetensorsTensorView& weight) const;
    Expected<Fp8BlockWeight> fp8_block(const SafetensorsTensorView& weight, int64_t rows, int64_t cols);

    const Checkpoint& checkpoint_;
    WeightFamily family_;
    WeightStoreOptions options_;
    std::set<std::string, std::less<>> requested_;
    std::set<std::string, std::less<>> missing_;
};

}  // namespace sieve

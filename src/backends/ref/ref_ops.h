// The ref backend's op functions (one file each) and the scalar element access they share.
// Internal to backends/ref.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/dtype.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/cache_view.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve::ref {

// Element i of a f32 or bf16 buffer, as fp32 (bf16 widened exactly).
inline float load(const void* base, DType t, int64_t i) {
    if (t == DType::bf16) return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    return static_cast<const float*>(base)[i];
}
// Stores v as t (bf16: round to nearest even, core/dtype.h).
inline void store(void* base, DType t, int64_t i, float v) {
    if (t == DType::bf16)
        static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
    else
        static_cast<float*>(base)[i] = v;
}

// Weights dequantized to fp32 exactly as ops/linear.h defines W (and rounded to bf16 for LinearMath::bf16).
class RefPreparedLinear final : public PreparedLinear {
public:
    RefPreparedLinear(const LinearWeights& w, std::vector<float> weight, std::vector<float> bias)
        : PreparedLinear(w.out_features, w.in_features, w.math, w.weight_type, w.groups),
          weight_(std::move(weight)), bias_(std::move(bias)) {}
    size_t bytes() const override { return (weight_.size() + bias_.size()) * sizeof(float); }
    std::string describe() const override { return "ref: dequantized f32 [out, in]"; }
    const std::vector<float>& weight() const { return weight_; }  // [out, in]
    const std::vector<float>& bias() const { return bias_; }      // [out] or empty

private:
    std::vector<float> weight_, bias_;
};

Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w);
Status linear(const RefPreparedLinear& w, const LinearParams& p);
Status rms_norm(const RmsNormParams& p);
Status layer_norm(const LayerNormParams& p);
Status rope(const RopeParams& p);
Status quant_fp8(const QuantFp8Params& p);
// One group of n fp32 values → e4m3 codes q[0, n) by ops/quant_fp8.h's rule; returns the scale s (a power
// of two), NaN for a poisoned group (a NaN or infinity in it). The one FP8 quantizer of the ref backend.
float quant_fp8_group(const float* v, int64_t n, uint8_t* q);
// The ue8m0 byte of a scale quant_fp8_group returned: log2(s) + 127, 0xFF for NaN.
uint8_t ue8m0_byte_of_scale(float s);
Status cache_store(const CacheStoreParams& p);  // ops/cache_store.h
Status kv_load(const KvLoadParams& p);          // ops/kv_load.h
Status selected_slots(const SelectedSlotsParams& p);  // ops/selected_slots.h
Status sparse_attention(const SparseAttentionParams& p);  // ops/sparse_attention.h
// The fp32 values of one cache entry (ops/kv_load.h's rule), out: [layout.dim]. What every ref op that
// reads a cache reads.
void load_record(const CacheView& v, const CacheRecordLayout& l, int64_t slot, float* out);
Status hadamard(const HadamardParams& p);
Status topk(const TopkParams& p);
Status indexer_scores(const IndexerScoresParams& p);  // ops/indexer_scores.h
// The fused selection of the indexer scores (ops/indexer_scores.h): topk over the rows
// the op just scored, valid_len = n_keys.
Status select_from_scores(const float* scores, int64_t scores_row_stride, const int32_t* n_keys, int64_t n_rows,
                          int64_t n_cols, int32_t* selected, int64_t k, int64_t selected_row_stride);
// The rows those ops score into: the caller's `scores` (row stride *row_stride), or, for a fused
// selection without score rows, `own` resized to [n_rows, n_cols] (*row_stride set to n_cols): ref
// always scores whole rows, then selects with select_from_scores.
float* indexer_score_rows(float* scores, int64_t* row_stride, bool selecting, int64_t n_rows, int64_t n_cols,
                          std::vector<float>& own);

}  // namespace sieve::ref

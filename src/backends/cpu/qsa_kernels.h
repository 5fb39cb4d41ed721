// The cpu backend's QSA kernel table (ops/qsa_pool.h, qsa_sparse_gqa.h): one instance
// per ISA level (qsa_kernels_<isa>.cpp over qsa_kernels_impl.inl), picked by the cpu backend from
// its ISA. Kept apart from kernels.h so that the QSA family's kernels build and test on their own.
//
// Included by the per-ISA translation units: plain declarations only (see simd.h, "ODR safety").
#pragma once

#include <cstddef>
#include <cstdint>

#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::cpu {

// Scratch of one sparse-GQA work slot (one thread), carved from the caller's workspace:
//   rows   [n_indices] byte offsets of the listed kv entries from kv.base
//   q      [gqa_group, head_dim] f32 copy of the group's query heads
//   acc    [gqa_group, head_dim] f32 P·V accumulators
//   stats  [2, gqa_group] f32 the online softmax's running max, then its running sum, per head
//   kt     [head_dim, kQsaGqaChunk] f32 K of one chunk of listed rows, transposed (shared by the group's heads)
//   lg     [gqa_group, kQsaGqaChunk] f32 logits of one chunk (then its softmax weights)
inline constexpr int64_t kQsaGqaHeadBatch = 12;  // query heads per P·V pass (QSA's group of 12 in one pass over V)
inline constexpr int64_t kQsaGqaChunk = 64;     // listed rows per chunk (a multiple of 2·kLanes on every ISA)
struct QsaGqaScratch {
    int64_t* rows = nullptr;
    float* q = nullptr;
    float* acc = nullptr;
    float* stats = nullptr;
    float* kt = nullptr;
    float* lg = nullptr;
};

struct QsaKernels {
    const char* isa_name;
    // group rows [g0, g1)
    void (*pool_groups)(const QsaPoolParams& p, int64_t g0, int64_t g1);
    // work items [i0, i1) of item = t·n_kv_heads + kv_head
    void (*sparse_gqa_items)(const QsaSparseGqaParams& p, int64_t i0, int64_t i1, const QsaGqaScratch& s);
};

extern const QsaKernels kQsaKernelsScalar;
extern const QsaKernels kQsaKernelsAvx2;
extern const QsaKernels kQsaKernelsAvx512;
extern const QsaKernels kQsaKernelsAvx512Bf16;

}  // namespace sieve::cpu

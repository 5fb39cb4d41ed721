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
//   tiles  the tile path's buffers (a table with tiles only, else nullptr): SIEVE_QSA_GQA_TILE_SCRATCH_FLOATS(D)
//          floats, laid out in qsa_kernels_impl.inl's order: acc [16, D], max [16], sum [16], q pairs [D/2][16],
//          K rows [CT, D] and V pairs [CT/2][D][2] (bf16), logits [CT][16] and [16][CT] (f32), weights [16][CT]
//          (bf16), CT = kQsaGqaTileChunk
struct QsaGqaScratch {
    int64_t* rows = nullptr;
    float* q = nullptr;
    float* acc = nullptr;
    float* stats = nullptr;
    float* kt = nullptr;
    float* lg = nullptr;
    float* tiles = nullptr;
};
inline constexpr int64_t kQsaGqaTileChunk = 256;  // listed rows per chunk of the tile path
#define SIEVE_QSA_GQA_TILE_SCRATCH_FLOATS(d) \
    (16 * (d) + 32 + 8 * (d) + ::sieve::cpu::kQsaGqaTileChunk * (d) + 40 * ::sieve::cpu::kQsaGqaTileChunk)

struct QsaKernels {
    const char* isa_name;
    bool tiles;  // sparse_gqa_items has the AMX tile path (and wants QsaGqaScratch::tiles)
    // group rows [g0, g1)
    void (*pool_groups)(const QsaPoolParams& p, int64_t g0, int64_t g1);
    // work items [i0, i1) of item = t·n_kv_heads + kv_head
    void (*sparse_gqa_items)(const QsaSparseGqaParams& p, int64_t i0, int64_t i1, const QsaGqaScratch& s);
};

extern const QsaKernels kQsaKernelsScalar;
extern const QsaKernels kQsaKernelsAvx2;
extern const QsaKernels kQsaKernelsAvx512;
extern const QsaKernels kQsaKernelsAvx512Bf16;
extern const QsaKernels kQsaKernelsAmxBf16;

}  // namespace sieve::cpu

// The cpu backend's DSA-on-MLA kernel table (ops/sparse_attention.h's MLA path, ops/dsa_indexer.h): one instance per
// ISA level (dsa_kernels_<isa>.cpp over dsa_kernels_impl.inl), picked with the backend's ISA. The
// per-ISA rules of kernels.h apply (plain declarations only; see simd.h, "ODR safety"). Validation,
// threading and workspace slicing live in dsa_cpu_ops.cpp (cpu_sparse_attention.cpp for the attention).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/dsa_indexer.h"
#include "ops/mla_head_proj.h"
#include "ops/sparse_attention.h"

namespace sieve::cpu {

// Entries gathered and dequantized per chunk of the sparse MLA kernel (online softmax over chunks).
inline constexpr int64_t kSparseMlaChunk = 64;
// Keys per work unit (a key tile of one sequence, scored for every query row of that sequence) of the
// indexer scores: at most this many; the dispatch code picks smaller tiles for short contexts.
inline constexpr int64_t kIndexerKeyChunk = 512;
// Tokens per work unit of the per-head projection (the kernel works on 4 at a time).
inline constexpr int64_t kHeadProjTokens = 64;

// Scratch layouts, as macros so that the per-ISA units and the dispatch code share one definition
// without an inline function (simd.h, "ODR safety"). Every segment is a multiple of 16 floats.
#define SIEVE_DSA_PAD16(n) ((((n) + 15) / 16) * 16)
// sparse_mla_heads for nh heads: q [nh, R+Dr] | chunk [C, R+Dr] | chunk transposed [R+Dr, C] | logits [nh, C] |
// acc [nh, R] | max [nh] | den [nh]
#define SIEVE_SPARSE_MLA_SCRATCH_FLOATS(nh, r, dr)                                                     \
    (SIEVE_DSA_PAD16((nh) * ((r) + (dr))) + 2 * SIEVE_DSA_PAD16(::sieve::cpu::kSparseMlaChunk * ((r) + (dr))) + \
     SIEVE_DSA_PAD16((nh) * ::sieve::cpu::kSparseMlaChunk) + SIEVE_DSA_PAD16((nh) * (r)) + 2 * SIEVE_DSA_PAD16(nh))
// head_proj_tokens: 4 activation rows [4, in]
#define SIEVE_HEAD_PROJ_SCRATCH_FLOATS(in) (4 * SIEVE_DSA_PAD16(in))
// indexer_scores_tile for tiles of ≤ kt keys, with Hp = PAD16(Hi) heads and Dp = PAD16(Di + 1) dims:
//   qᵀ [Dp, Hp] (f32, or bf16 pairs in the first half) | head weights [Hp] | converted key tile [kt, Dp] |
//   row pointers [kt] (2 floats each) | key scales [kt] | flags [kt] | zero row [Dp] | one key [Dp] | tag [16]
// (the tag holds the token whose qᵀ and weights are in the scratch; −1 = none, set by the dispatch code).
#define SIEVE_DSA_IDX_HP(hi) SIEVE_DSA_PAD16(hi)
#define SIEVE_DSA_IDX_DP(di) SIEVE_DSA_PAD16((di) + 1)
#define SIEVE_INDEXER_SCORES_SCRATCH_FLOATS(hi, di, kt)                                                  \
    (SIEVE_DSA_IDX_DP(di) * SIEVE_DSA_IDX_HP(hi) + SIEVE_DSA_IDX_HP(hi) + (kt) * SIEVE_DSA_IDX_DP(di) + \
     4 * SIEVE_DSA_PAD16(kt) + 2 * SIEVE_DSA_IDX_DP(di) + 16)

struct DsaCpuKernels {
    const char* isa_name;
    // out rows of token t, heads [head_begin, head_end) over the main list (f32 | fp8_v32);
    // scratch: SIEVE_SPARSE_MLA_SCRATCH_FLOATS(head_end − head_begin, v_dim, qk_dim − v_dim)
    void (*sparse_mla_heads)(const SparseAttentionParams& p, int64_t t, int64_t head_begin, int64_t head_end,
                             float* scratch);
    // For each query row t of tokens[0 .. n_tokens) (all of sequence `seq`): scores[t, key_begin .. key_end)
    // (≤ key_tile keys, each key converted once for all the rows), and −inf over [max(key_begin, n_keys[t]),
    // fill_end) (fill_end ≥ key_end). scratch: SIEVE_INDEXER_SCORES_SCRATCH_FLOATS(Hi, Di, key_tile), 64-aligned.
    // With tile_scores (fused selection), row i's scores go to tile_scores[i·key_tile + u − key_begin] instead
    // (i = the row's position in tokens) and nothing is filled.
    void (*indexer_scores_tile)(const DsaIndexerScoresParams& p, int64_t seq, const int32_t* tokens, int64_t n_tokens,
                                int64_t key_begin, int64_t key_end, int64_t fill_end, int64_t key_tile, float* scratch,
                                float* tile_scores);
    // y rows of head h for tokens [token_begin, token_end); scratch: SIEVE_HEAD_PROJ_SCRATCH_FLOATS(in_features)
    void (*head_proj_tokens)(const MlaHeadProjParams& p, int64_t h, int64_t token_begin, int64_t token_end,
                             float* scratch);
};

extern const DsaCpuKernels kDsaCpuKernelsScalar;
extern const DsaCpuKernels kDsaCpuKernelsAvx2;
extern const DsaCpuKernels kDsaCpuKernelsAvx512;
extern const DsaCpuKernels kDsaCpuKernelsAvx512Bf16;

}  // namespace sieve::cpu

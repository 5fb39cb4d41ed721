// The cpu backend's DSA-on-MLA kernel table (ops/sparse_attention.h's MLA path, ops/mla_head_proj.h): one instance per
// ISA level (dsa_kernels_<isa>.cpp over dsa_kernels_impl.inl), picked with the backend's ISA. The
// per-ISA rules of kernels.h apply (plain declarations only; see simd.h, "ODR safety"). Validation,
// threading and workspace slicing live in dsa_cpu_ops.cpp (cpu_sparse_attention.cpp for the attention).
#pragma once

#include <cstddef>
#include <cstdint>

#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::cpu {

// Entries gathered and dequantized per chunk of the sparse MLA kernel (online softmax over chunks).
inline constexpr int64_t kSparseMlaChunk = 64;
// Entries per chunk of its tile path (DsaCpuKernels::tiles; attention_kernels_impl.inl attn_tiles_chunk).
inline constexpr int64_t kSparseMlaTileChunk = 256;
// Tokens per work unit of the per-head projection (the kernel works on 4 at a time).
inline constexpr int64_t kHeadProjTokens = 64;

// Scratch layouts, as macros so that the per-ISA units and the dispatch code share one definition
// without an inline function (simd.h, "ODR safety"). Every segment is a multiple of 16 floats.
#define SIEVE_DSA_PAD16(n) ((((n) + 15) / 16) * 16)
// sparse_mla_heads for nh heads (nh16 = SIEVE_DSA_PAD16(nh): the tile path's head groups of 16):
// q [nh, R+Dr] | chunk [C, R+Dr] | chunk transposed [R+Dr, C] | logits [nh, C] | acc [nh16, R] | max [nh16] |
// den [nh16]
#define SIEVE_SPARSE_MLA_SCRATCH_FLOATS(nh, r, dr)                                                     \
    (SIEVE_DSA_PAD16((nh) * ((r) + (dr))) + 2 * SIEVE_DSA_PAD16(::sieve::cpu::kSparseMlaChunk * ((r) + (dr))) + \
     SIEVE_DSA_PAD16((nh) * ::sieve::cpu::kSparseMlaChunk) + SIEVE_DSA_PAD16(nh) * (r) + 2 * SIEVE_DSA_PAD16(nh))
// Then, for a table with tiles, its tile path's buffers (attention_kernels_impl.inl AttnTileBuffers, CT =
// kSparseMlaTileChunk, each part padded to 16 floats): qt [nh16 · (R+Dr)/2] | kb [CT · (R+Dr)/2] |
// kv [CT · R/2] | lt [CT · 16] | pt [16 · CT] | pb [16 · CT/2]
#define SIEVE_SPARSE_MLA_TILE_SCRATCH_FLOATS(nh, r, dr)                                                   \
    (SIEVE_DSA_PAD16(SIEVE_DSA_PAD16(nh) * ((r) + (dr)) / 2) +                                            \
     SIEVE_DSA_PAD16(::sieve::cpu::kSparseMlaTileChunk * ((r) + (dr)) / 2) +                             \
     SIEVE_DSA_PAD16(::sieve::cpu::kSparseMlaTileChunk * (r) / 2) + 2 * 16 * ::sieve::cpu::kSparseMlaTileChunk + \
     8 * ::sieve::cpu::kSparseMlaTileChunk)
// head_proj_tokens: 4 activation rows [4, in]
#define SIEVE_HEAD_PROJ_SCRATCH_FLOATS(in) (4 * SIEVE_DSA_PAD16(in))
struct DsaCpuKernels {
    const char* isa_name;
    bool tiles;  // sparse_mla_heads has the tile path (AMX, or register tiles at avx512_bf16), its scratch the
                 // tile buffers
    // out rows of token t, heads [head_begin, head_end) over the main list (f32 | fp8_v32);
    // scratch: SIEVE_SPARSE_MLA_SCRATCH_FLOATS(head_end − head_begin, v_dim, qk_dim − v_dim), plus
    // SIEVE_SPARSE_MLA_TILE_SCRATCH_FLOATS of the same for a table with tiles
    void (*sparse_mla_heads)(const SparseAttentionParams& p, int64_t t, int64_t head_begin, int64_t head_end,
                             float* scratch);
    // y rows of head h for tokens [token_begin, token_end); scratch: SIEVE_HEAD_PROJ_SCRATCH_FLOATS(in_features)
    void (*head_proj_tokens)(const MlaHeadProjParams& p, int64_t h, int64_t token_begin, int64_t token_end,
                             float* scratch);
};

extern const DsaCpuKernels kDsaCpuKernelsScalar;
extern const DsaCpuKernels kDsaCpuKernelsAvx2;
extern const DsaCpuKernels kDsaCpuKernelsAvx512;
extern const DsaCpuKernels kDsaCpuKernelsAvx512Bf16;
extern const DsaCpuKernels kDsaCpuKernelsAmxBf16;

}  // namespace sieve::cpu

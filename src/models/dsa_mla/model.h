// DeepSeek Sparse Attention on MLA: the attention stack of DeepSeek-V3.2 (model_type deepseek_v32) and
// Tencent Hy4 (hy_v4) as an AttentionModel (specs/dsa_mla.md). One implementation, per-model options
// from the config: indexer RoPE slice and pairing, latent-norm eps, YaRN, Hy4's output gate, learnable
// sink and shared top-k layers.
//
// Profiles ("Decisions for sieve"):
//   exact     fp32 compute; latent cache f32 [R + Dr], indexer key cache f32 [Di]; no Hadamard.
//   deployed  bf16 activations (bf16 GEMM math), the 656-byte-style fp8_v32 latent record (§3.4), FP8
//             indexer keys in the 132-byte-style per-block layout (§3.3), FP8 indexer queries with UE8M0
//             scales (§2.6), the Hadamard rotation of q and k for deepseek_v32 only (specs/README.md
//             "Open points settled"), the attention weights cast to bf16 for P·V (FlashMLA's bf16 MMAs, §3.4).
// Caches: group "latent_kv" (every loaded layer) and "indexer_keys" (loaded full layers), block size 64
// (§4.1), agreeing with models/dsa_mla/layout.cpp.
// Not implemented (unsupported errors): MTP layers (layers() lists the main layers only).
#pragma once

#include <memory>

#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_model.h"
#include "sieve/models/model_factory.h"

namespace sieve {

Expected<std::unique_ptr<AttentionModel>> load_dsa_mla_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                              const ModelOptions& options);

}  // namespace sieve

"""deepseek_v4 (DeepSeek-V4: sliding-window, CSA and HCA attention layers with compressors and a
lightning indexer, under manifold hyper-connections) in vLLM with sieve's attention.

vLLM builds deepseek_v4 on the CPU as ``vllm.models.deepseek_v4.cpu.model.DeepseekV4ForCausalLM``,
whose ``DeepseekV4CPUAttention`` (``cpu/cpu_sparse.py``) hard-codes the release sizes (head_dim 512,
index_head_dim 128, index_topk 512, compress ratios 4/128) and whose metadata builders need Triton,
absent from the CPU wheel. The subclass builds the same model with a SieveAttention module where each
decoder layer builds ``self.attn`` (``cpu/model.py:259-263``, called as ``self.attn(positions, x, None)``
on the attn-normed hyper-connection input, 384/420); sieve loads the attention weights (projections,
norms, sink, compressors, indexer) from the checkpoint itself. The mHC, MoE and LM head stay vLLM's, with
the non-attention gaps of vLLM 0.32 filled (``deepseek_v4_cpu``).

bf16 only: vLLM's CPU mHC ops (``hc_{pre,post,head}_fused_cpu``) take bf16/fp16 activations, so sieve
runs its deployed profile (FP8 caches). sieve's cache groups have blocks of 64 tokens (the SWA rows), 256
tokens (compressed rows and indexer keys: 64 entries of 4 tokens, 16 of 16) and compressor-state rows
(as many as fit in the largest other block: ``state_block_size="fit"``, since vLLM pads every page to the
largest); each is a vLLM KV cache group of its own (``SieveStack``), so the block_size 256 that vLLM's CPU
platform forces for deepseek_v4 (``platforms/cpu.py``) does not constrain them.
"""

from __future__ import annotations

import re
from unittest import mock

from vllm.config import VllmConfig
from vllm.models.deepseek_v4.cpu import model as v4_model

from . import deepseek_v4_cpu
from .attention import SieveStack, attention_factory, require_bfloat16

_LAYER = re.compile(r"\.layers\.(\d+)\.attn$")


class SieveDeepseekV4ForCausalLM(v4_model.DeepseekV4ForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        require_bfloat16(vllm_config, "deepseek_v4", "vLLM's CPU hyper-connection ops take bf16/fp16 activations")
        if not isinstance(vllm_config.model_config.hf_config, deepseek_v4_cpu.DeepseekV4SieveConfig):
            raise RuntimeError(
                "sieve-vllm: the deepseek_v4 config was not parsed by sieve_vllm's DeepseekV4SieveConfig "
                f"(got {type(vllm_config.model_config.hf_config).__name__}); another plugin replaced it")
        deepseek_v4_cpu.install_moe_routing_fallback()
        stack = SieveStack(vllm_config)
        # DeepseekV4DecoderLayer builds its attention by this module name (cpu/model.py:61, 259).
        with mock.patch.object(v4_model, "DeepseekV4CPUAttention", attention_factory(stack, _LAYER)):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._sieve_stack = [stack]

    def load_weights(self, weights):
        # sieve loaded the attention weights (everything under .attn.; attn_norm and the hc_attn_*
        # hyper-connection weights sit on the decoder layer and stay vLLM's).
        return super().load_weights((deepseek_v4_cpu.vllm_weight_name(name), w) for name, w in weights
                                    if ".attn." not in name)

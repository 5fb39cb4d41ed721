"""hy_v4 (Tencent Hy4: DSA on MLA with an output gate, a learnable sink and layers that reuse another
layer's top-k) in vLLM with sieve's attention.

vLLM builds hy_v4 as its HYV4ForCausalLM, whose sparse attention needs a CUDA sparse-MLA backend
(HYV4MLAAttention raises on the CPU). The subclass builds the same model with a SieveAttention
module in place of each layer's HYV4MLAAttention; sieve loads the attention weights (and runs the
shared-top-k layers from their source layers, dsa_mla.md §1.3) itself.
"""

from __future__ import annotations

import re
from unittest import mock

from vllm.config import VllmConfig
from vllm.models.hy_v4.nvidia import model as hy_v4_model

from .attention import SieveStack, attention_factory

_LAYER = re.compile(r"\.layers\.(\d+)\.self_attn$")

# Checkpoints written by transformers' save_pretrained carry the hyper-connection and MLP-gate names
# of its hy_v4 conversion rules inverted onto other modules (model.hc_pre.hc_head.*,
# layers.N.hc_pre.hc_attn_layer.*, mlp.linear_gate.*), which vLLM's loader would skip (and leave
# hc_fn and the gate half of gate_up_proj uninitialised). These rules restore the names the original
# checkpoints and vLLM use; they match nothing in those.
_TRANSFORMERS_NAMES = [
    (re.compile(r"^model\.hc_pre\.hc_head\."), "model.hc_head."),
    (re.compile(r"\.hc_pre\.(hc_attn_layer|hc_mlp_layer)\.hc_"), r".\1.hc_pre.hc_"),
    (re.compile(r"\.mlp\.linear_gate\."), ".mlp.gate_proj."),
]


def _vllm_name(name: str) -> str:
    for pattern, replacement in _TRANSFORMERS_NAMES:
        name = pattern.sub(replacement, name)
    return name


class SieveHYV4ForCausalLM(hy_v4_model.HYV4ForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        stack = SieveStack(vllm_config)
        # HYV4DecoderLayer builds its attention by this module name.
        with mock.patch.object(hy_v4_model, "HYV4MLAAttention", attention_factory(stack, _LAYER)):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._sieve_stack = [stack]

    def load_weights(self, weights):
        # sieve loaded the attention weights (projections, norms, gate, sink, indexer) from the checkpoint.
        return super().load_weights((_vllm_name(name), w) for name, w in weights if ".self_attn." not in name)

"""deepseek_v32 (DeepSeek-V3.2, DSA on MLA) in vLLM with sieve's attention.

vLLM builds deepseek_v32 off CUDA as its DeepseekV3ForCausalLM, whose sparse MLA layers its CPU
platform refuses. The subclass below builds the same model with a SieveAttention module where each
decoder layer would build its attention, and leaves the attention weights to sieve, which loads them
from the checkpoint directory itself.
"""

from __future__ import annotations

import re
from unittest import mock

from vllm.config import VllmConfig
from vllm.model_executor.models import deepseek_v2

from .attention import SieveStack, attention_factory

_LAYER = re.compile(r"\.layers\.(\d+)\.self_attn$")


class SieveDeepseekV32ForCausalLM(deepseek_v2.DeepseekV3ForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        stack = SieveStack(vllm_config)
        attention = attention_factory(stack, _LAYER)
        # The decoder layer picks its attention class by these module names when it is built.
        with mock.patch.object(deepseek_v2, "DeepseekV2MLAAttention", attention), \
             mock.patch.object(deepseek_v2, "DeepseekV2Attention", attention):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._sieve_stack = [stack]

    def load_weights(self, weights):
        # sieve loaded the attention weights (q/kv projections, norms, indexer) from the checkpoint.
        return super().load_weights((name, w) for name, w in weights if ".self_attn." not in name)

"""qwen4_exp (Qwen3.8-Flash-Next: gated GQA with QSA sparse attention, GDN linear-attention layers,
hyper-connections) in vLLM with sieve's attention, as the text-only Qwen4ExpForCausalLM.

Run vLLM with ``hf_overrides={"architectures": ["Qwen4ExpForCausalLM"]}`` (the checkpoint names
Qwen4ExpForConditionalGeneration): that class builds no vision tower and uses plain positions. The QSA
layers (``self_attn``) become SieveAttention; the GDN layers, MLP/MoE and hyper-connections stay
vLLM's, with the CPU gaps of vLLM 0.32 filled: the Triton-only hyper-connection ops in torch
(``qwen4_exp_hc``) and the GDN prefill for head sizes its C++ kernel refuses (``qwen4_exp_gdn``).
bf16 only: vLLM's CPU GDN asserts bf16 and its hyper-connection weights are bf16.
"""

from __future__ import annotations

import re
from unittest import mock

from vllm.config import VllmConfig
from vllm.models.qwen4_exp.nvidia import model as qwen4_model

from . import qwen4_exp_gdn, qwen4_exp_hc
from .attention import SieveStack, attention_factory, require_bfloat16

_LAYER = re.compile(r"\.layers\.(\d+)\.self_attn$")


class SieveQwen4ExpForCausalLM(qwen4_model.Qwen4ExpForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        require_bfloat16(vllm_config, "qwen4_exp", "vLLM's CPU GDN layers and bf16 hyper-connection weights")
        qwen4_exp_hc.patch()
        qwen4_exp_gdn.patch()
        config = vllm_config.model_config.hf_text_config
        if getattr(config, "output_gate_type", None) is None:
            # transformers reads a null output_gate_type as hidden_act (configuration_qwen4_exp.py); vLLM's
            # GDN defaults only a missing attribute and asserts on None (qwen_gdn_linear_attn.py).
            config.output_gate_type = config.hidden_act
        stack = SieveStack(vllm_config)
        # Qwen4ExpDecoderLayer builds its QSA attention by this module name.
        with mock.patch.object(qwen4_model, "Qwen4ExpQSAAttention", attention_factory(stack, _LAYER)):
            super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._sieve_stack = [stack]

    def load_weights(self, weights):
        # sieve loaded the QSA weights itself; the text-only class has no vision tower.
        return super().load_weights((name, w) for name, w in weights
                                    if ".self_attn." not in name and not name.startswith("model.visual."))

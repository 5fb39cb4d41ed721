"""What vLLM 0.32's CPU model of deepseek_v4 lacks outside attention, for transformers-written checkpoints.

Three gaps, none of them in the attention that sieve replaces:

* **config** (``install_config_translation``, from ``register()`` in every process): vLLM parses
  config.json with its own ``DeepseekV4Config`` (``transformers_utils/config.py:93``), whose base-class
  validator refuses transformers' ``mlp_layer_types`` ["moe", ...] ("entries must be in ('sparse',
  'dense')", ``transformers/configuration_utils.py:577``); ``hf_overrides`` come only after parsing
  (``transformers_utils/config.py:926-931``). ``DeepseekV4SieveConfig`` translates the transformers fields.
  Its class is pickled into the engine and worker processes, so it lives at module level here.
* **weight names** (``vllm_weight_name``, in the model's ``load_weights``): transformers' save_pretrained
  writes ``model.hc_head.hc_{fn,base,scale}``; vLLM's parameters are ``model.hc_head_{fn,base,scale}``
  (``models/deepseek_v4/cpu/model.py:512-530``), and its mapper's ``hc_head`` prefix rule fits only
  unprefixed names: ``KeyError`` at ``cpu/model.py:770``.
* **MoE routing** (``install_moe_routing_fallback``, from the model's ``__init__``): the CPU router's
  ``torch.ops._C.biased_topk_cpu`` is compiled for num_experts in {64, 128, 256, 384} x top-k in
  {6, 8, 9} only ("biased_topk_cpu: unsupported num_experts"); other sizes route in torch, as
  transformers' ``DeepseekV4TopKRouter`` does.
"""

from __future__ import annotations

import re

import torch
from vllm.transformers_utils.configs.deepseek_v4 import DeepseekV4Config


def translate_config(kwargs: dict) -> dict:
    """transformers' deepseek_v4 config fields (configuration_deepseek_v4.py) as vLLM's CPU model reads them.

    * ``mlp_layer_types`` ["hash_moe"*k + "moe"*rest] -> ``num_hash_layers`` = k: vLLM routes a layer by
      hash when ``layer < num_hash_layers`` (``cpu/model.py:148``).
    * ``topk_method="noaux_tc"``: transformers' router always adds ``e_score_correction_bias``; vLLM
      creates that parameter only for noaux_tc (``cpu/model.py:163-167``; the checkpoint's
      ``ffn.gate.bias`` maps onto it).
    * no ``compress_ratios``: only vLLM's own attention (replaced by sieve's) reads them, and their presence
      would switch ``is_deepseek_mla``/``get_head_size`` to the V4 MLA branch
      (``transformers_utils/model_arch_config_convertor.py:89-93, 343-347``). sieve reads the layer types
      and compress rates from config.json itself.
    * ``qk_rope_head_dim`` from ``head_dim * partial_rotary_factor`` where transformers did not write it.
    """
    kw = dict(kwargs)
    mlp_types = kw.pop("mlp_layer_types", None)
    if mlp_types is not None:
        n_hash = 0
        while n_hash < len(mlp_types) and mlp_types[n_hash] == "hash_moe":
            n_hash += 1
        if any(t != "moe" for t in mlp_types[n_hash:]):
            raise ValueError(f"sieve-vllm: deepseek_v4 mlp_layer_types {mlp_types}: vLLM runs hash-routed MoE "
                             "layers only as the leading layers (num_hash_layers), then 'moe' layers")
        kw.setdefault("num_hash_layers", n_hash)
    kw.setdefault("num_hash_layers", 0)
    kw.setdefault("topk_method", "noaux_tc")
    if "qk_rope_head_dim" not in kw and kw.get("head_dim") and kw.get("partial_rotary_factor"):
        kw["qk_rope_head_dim"] = int(kw["head_dim"] * kw["partial_rotary_factor"])
    return kw


class DeepseekV4SieveConfig(DeepseekV4Config):
    """vLLM's DeepseekV4Config, reading a transformers-format config.json (``translate_config``)."""

    model_type = "deepseek_v4"

    def __init__(self, **kwargs):
        super().__init__(**translate_config(kwargs))


def install_config_translation() -> None:
    from vllm.transformers_utils import config as vllm_config_module

    # _CONFIG_REGISTRY is a LazyConfigDict (config.py:71-78): a class stored with dict.__setitem__ is
    # returned as is, where a string would be imported from vLLM's configs package.
    dict.__setitem__(vllm_config_module._CONFIG_REGISTRY, "deepseek_v4", DeepseekV4SieveConfig)


_WEIGHT_NAMES = [(re.compile(r"^model\.hc_head\.hc_(fn|base|scale)$"), r"model.hc_head_\1")]


def vllm_weight_name(name: str) -> str:
    for pattern, replacement in _WEIGHT_NAMES:
        name = pattern.sub(replacement, name)
    return name


_BIASED_TOPK_EXPERTS = (64, 128, 256, 384)  # biased_topk_cpu's template instances
_BIASED_TOPK_K = (6, 8, 9)


def _sqrtsoftplus_topk_torch(router_logits, top_k, bias, routed_scaling_factor, input_ids=None, hash_table=None):
    """transformers' DeepseekV4TopKRouter / HashRouter: sqrt(softplus) scores, top-k of scores + bias (or
    the token's hashed experts), weights = the chosen scores renormalised and scaled."""
    scores = torch.sqrt(torch.nn.functional.softplus(router_logits.float()))
    if hash_table is not None:
        ids = hash_table[input_ids].long()
    else:
        ids = torch.topk(scores + bias.float(), top_k, dim=-1, sorted=False).indices
    weights = scores.gather(1, ids)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * routed_scaling_factor
    return weights.to(torch.float32).contiguous(), ids.to(torch.int32).contiguous()


def install_moe_routing_fallback() -> None:
    """Replaces ``cpu_router._sqrtsoftplus_bias_topk`` (defined at ``fused_moe/router/cpu_router.py:81``,
    looked up at call time at 229); the compiled sizes still run the C++ kernel."""
    from vllm.model_executor.layers.fused_moe.router import cpu_router

    native = cpu_router._sqrtsoftplus_bias_topk
    if getattr(native, "_sieve_fallback", False):
        return

    def _sqrtsoftplus_bias_topk(router_logits, top_k, renormalize, e_score_correction_bias,
                                routed_scaling_factor, input_ids, hash_indices_table):
        if not renormalize:
            raise NotImplementedError("sieve-vllm: deepseek_v4 routing without renormalisation")
        if hash_indices_table is None:
            if router_logits.shape[-1] in _BIASED_TOPK_EXPERTS and top_k in _BIASED_TOPK_K:
                return native(router_logits, top_k, renormalize, e_score_correction_bias, routed_scaling_factor,
                              input_ids, hash_indices_table)
            return _sqrtsoftplus_topk_torch(router_logits, top_k, e_score_correction_bias, routed_scaling_factor)
        try:  # hash_topk_cpu's compiled sizes are not listed anywhere: try it
            return native(router_logits, top_k, renormalize, e_score_correction_bias, routed_scaling_factor,
                          input_ids, hash_indices_table)
        except RuntimeError:
            return _sqrtsoftplus_topk_torch(router_logits, top_k, None, routed_scaling_factor, input_ids,
                                            hash_indices_table)

    _sqrtsoftplus_bias_topk._sieve_fallback = True
    cpu_router._sqrtsoftplus_bias_topk = _sqrtsoftplus_bias_topk

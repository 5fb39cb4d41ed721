"""deepseek_v4 in vLLM 0.32.0 with vLLM's OWN CPU attention, made to run on the CPU wheel (no Triton).

``VllmOwnDeepseekV4ForCausalLM`` is ``vllm.models.deepseek_v4.cpu.model.DeepseekV4ForCausalLM`` itself
(attention: ``DeepseekV4CPUAttention``, ``models/deepseek_v4/cpu/cpu_sparse.py:268``, built by each decoder
layer at ``cpu/model.py:259``); nothing of its forward pass is replaced. What it adds, each because vLLM
0.32.0 does not run without it on a transformers-written checkpoint on the CPU wheel:

1. **Triton metadata kernels** (``kernels.install_metadata_kernels``, at model construction in the worker,
   before any metadata builder exists): the SWA, compressor, sparse-MLA and indexer metadata builders
   launch Triton kernels; without a Triton CPU backend the first step fails at
   ``v1/attention/ops/metadata.py:43``. torch versions are registered through vLLM's own dispatcher.
2. **Tile-scheduler keys** (``install_tile_scheduler_fix``): ``DeepseekV4CPUSparseSWAMetadataBuilder.
   build_tile_scheduler`` (``models/deepseek_v4/cpu/cpu_mla.py:116-126``) returns only the swaonly / c4a /
   c128a keys, but ``DeepseekSparseSWAMetadataBuilder.build`` reads ``c1a`` and ``c2a`` too
   (``v1/attention/backends/mla/sparse_swa.py:780-781``; also 897-898): ``KeyError: 'c1a'``. The fixed
   method returns None (no FlashMLA plan, as on CPU) for every layer type the base class lists.
3. **Config** (``DeepseekV4BaselineConfig``, ``install_config_class``): sieve_vllm's
   ``DeepseekV4SieveConfig`` translates transformers' config.json for vLLM (``sieve_vllm/deepseek_v4_cpu.py``
   ``translate_config``) but leaves out ``compress_ratios``, which only vLLM's own attention reads:
   per layer ``max(1, compress_ratios[layer])`` (``models/deepseek_v4/attention.py:232-235``), and their
   presence makes vLLM treat the model as V4 MLA (``transformers_utils/model_arch_config_convertor.py:89-93,
   343-347``: head size 512, the fp8_ds_mla caches). The subclass derives them from transformers'
   ``layer_types`` and ``compress_rates`` (sliding_attention -> 0, the release convention).
4. **Weight names and MoE routing**: sieve_vllm's fixes, reused as they are
   (``sieve_vllm.deepseek_v4_cpu.vllm_weight_name``: ``model.hc_head.hc_*`` -> ``model.hc_head_*``,
   ``KeyError`` at ``cpu/model.py:770`` otherwise; ``install_moe_routing_fallback``: the CPU router's
   ``biased_topk_cpu`` is compiled for 64/128/256/384 experts only, ``fused_moe/router/cpu_router.py:81,
   125``). Unlike sieve's model, every checkpoint weight goes to vLLM's loader, the attention's too, and
   one attention name needs a rename sieve's list lacks (sieve loads the attention weights itself):
   transformers loads the release name ``.attn.kv_norm.`` as is but maps every ``.norm.`` to ``.kv_norm.``
   (``transformers/conversion_mapping.py:571`` in transformers 5.19), so its
   save_pretrained writes the attention's kv norm as ``.attn.norm.weight``; vLLM's parameter is
   ``attn.kv_norm.weight`` (``models/deepseek_v4/attention.py:266``; ``KeyError`` at ``cpu/model.py:770``).
   The compressors' ``.compressor.norm.`` is vLLM's name already.

bf16 only, as vLLM's CPU V4 backend (``models/deepseek_v4/sparse_mla.py:42``, supported dtypes [bf16]) and
its mHC ops require. The checkpoint must have the sizes vLLM's CPU kernels hard-code (head_dim 512, RoPE 64,
indexer heads 128, top-k 512, ratios 4 / 128, o_lora_rank a multiple of 32):
tools/bench/vllm/make_v4_vllm_sizes_ckpt.py writes one.
"""

from __future__ import annotations

import re

import torch
from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.models.deepseek_v4.cpu import model as v4_model
from sieve_vllm import deepseek_v4_cpu

from . import LOG_PREFIX, kernels

log = init_logger("vllm.sieve_vllm_v4_baseline")

# transformers' deepseek_v4 layer types (configuration_deepseek_v4.py DEEPSEEK_V4_LAYER_TYPES); the
# sliding layers have no compressor, written 0 in the release config's compress_ratios.
_SLIDING = "sliding_attention"
_KV_NORM = re.compile(r"^(model\.layers\.\d+\.attn)\.norm\.weight$")


def weight_name(name: str) -> str:
    """A transformers-written checkpoint name as vLLM's own deepseek_v4 CPU model loads it."""
    return _KV_NORM.sub(r"\1.kv_norm.weight", deepseek_v4_cpu.vllm_weight_name(name))


def compress_ratios_of(kwargs: dict) -> list[int]:
    """vLLM's per-layer ``compress_ratios`` from transformers' ``layer_types`` and ``compress_rates``."""
    layer_types = kwargs.get("layer_types")
    rates = kwargs.get("compress_rates")
    if not layer_types or rates is None:
        raise ValueError(f"{LOG_PREFIX}the deepseek_v4 config.json has neither compress_ratios nor transformers' "
                         "layer_types + compress_rates: cannot tell vLLM's attention each layer's compress ratio")
    ratios = []
    for t in layer_types:
        if t == _SLIDING:
            ratios.append(0)
        elif t in rates:
            ratios.append(int(rates[t]))
        else:
            raise ValueError(f"{LOG_PREFIX}deepseek_v4 layer type {t!r} has no compress rate in {rates}")
    return ratios


class DeepseekV4BaselineConfig(deepseek_v4_cpu.DeepseekV4SieveConfig):
    """sieve_vllm's translating config class plus ``compress_ratios`` for vLLM's own attention (module level:
    vLLM pickles the config into its engine and worker processes)."""

    model_type = "deepseek_v4"

    def __init__(self, **kwargs):
        if "compress_ratios" not in kwargs and kwargs.get("layer_types"):
            kwargs["compress_ratios"] = compress_ratios_of(kwargs)
        super().__init__(**kwargs)


def install_config_class() -> None:
    """Makes vLLM parse deepseek_v4 config.json files with ``DeepseekV4BaselineConfig``, the way
    ``sieve_vllm.deepseek_v4_cpu.install_config_translation`` installs sieve's class (that function takes no
    class argument): ``_CONFIG_REGISTRY`` (``transformers_utils/config.py:81``) is a LazyConfigDict that
    returns a class stored with dict.__setitem__ as is (config.py:71-78)."""
    from vllm.transformers_utils import config as vllm_config_module

    dict.__setitem__(vllm_config_module._CONFIG_REGISTRY, "deepseek_v4", DeepseekV4BaselineConfig)


def install_tile_scheduler_fix() -> None:
    from vllm.models.deepseek_v4.cpu import cpu_mla
    from vllm.v1.attention.backends.mla import sparse_swa

    builder = cpu_mla.DeepseekV4CPUSparseSWAMetadataBuilder
    if getattr(builder.build_tile_scheduler, "_v4_baseline_fix", False):
        return
    layer_types = (sparse_swa._LAYER_TYPE_SWAONLY, sparse_swa._LAYER_TYPE_C4A, sparse_swa._LAYER_TYPE_C128A,
                   sparse_swa._LAYER_TYPE_C1A, sparse_swa._LAYER_TYPE_C2A)

    def build_tile_scheduler(self, num_decode_tokens):
        # No FlashMLA tile-scheduler plan on the CPU, for any layer type build() asks about.
        return dict.fromkeys(layer_types)

    build_tile_scheduler._v4_baseline_fix = True
    builder.build_tile_scheduler = build_tile_scheduler


class VllmOwnDeepseekV4ForCausalLM(v4_model.DeepseekV4ForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        if vllm_config.model_config.dtype != torch.bfloat16:
            raise NotImplementedError(
                f"{LOG_PREFIX}vLLM's CPU deepseek_v4 attention runs in bfloat16 only, not "
                f"{vllm_config.model_config.dtype}: run vLLM with dtype=bfloat16")
        config = vllm_config.model_config.hf_config
        if not isinstance(config, DeepseekV4BaselineConfig) or not getattr(config, "compress_ratios", None):
            raise RuntimeError(
                f"{LOG_PREFIX}the deepseek_v4 config was not parsed by DeepseekV4BaselineConfig (got "
                f"{type(config).__name__}): another plugin replaced the config class")
        kernels.install_metadata_kernels()
        install_tile_scheduler_fix()
        deepseek_v4_cpu.install_moe_routing_fallback()
        log.info(LOG_PREFIX + "vLLM's own DeepseekV4CPUAttention runs the attention (compress ratios %s; torch "
                 "metadata kernels: %s)", list(config.compress_ratios),
                 ", ".join(name.rsplit(".", 2)[-2] if name.endswith(".kernel") else name.rsplit(".", 1)[-1]
                           for name in kernels.OVERRIDES))
        super().__init__(vllm_config=vllm_config, prefix=prefix)

    def load_weights(self, weights):
        return super().load_weights((weight_name(name), w) for name, w in weights)

#!/usr/bin/env python3
"""Generate sieve golden fixtures (format `sieve-golden/1`, specs/golden_format.md).

For each family this script builds a small random-weight model with transformers, saves it with
`save_pretrained` into `<out>/<family>/ckpt/`, runs every request alone as one full-sequence forward
(batch 1, no padding, eager attention, fp32, use_cache=False, deterministic CPU run) and writes
`<out>/<family>/golden.safetensors` with, per request r and attention layer L (the model's own layer
index):

  req{r}.positions        I64 [T]          0..T-1
  req{r}.layer{L}.input   F32 [T, hidden]  what the attention module received (forward hook)
  req{r}.layer{L}.output  F32 [T, hidden]  what the attention module returned as its output
  req{r}.layer{L}.topk    I32 [T, K]       the indices the layer attended with (layers with an indexer, and
                                           hy_v4 shared layers), valid entries ascending, then -1

With --raw-topk the .topk rows are kept as the reference's top-k returned them instead (score order,
future positions and not-yet-complete entries included, see RAW_TOPK_NOTE), for shorter requests
(Family.raw_topk_requests); the metadata then has `topk_rows` = `raw`.

With --mtp the reference model gets one more layer n = num_hidden_layers of the attention kind the spec assigns
the family's MTP layer (Family.mtp), layer n is captured too, and the checkpoint is written as an n-layer
checkpoint with one MTP layer (layer n's tensors under the MTP prefix; see "MTP fixtures" below); the metadata
then has `mtp_layers` = "n".

Usage:  python tools/golden/make_golden.py --family all --out tests/data [--seed 19]
        python tools/golden/make_golden.py --family all --out tests/data/raw_topk --raw-topk
        python tools/golden/make_golden.py --family all --out tests/data/mtp --seed 19 --mtp

Only the Python packages in tools/golden/requirements.txt are needed (see tools/golden/README.md).
Nothing in sieve's C++ build runs this script.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

import torch

FORMAT = "sieve-golden/1"
# Seed 19 gives, in every fixture, no top-k row whose boundary gap is below 1.9e-4 x max|score| (no ties).
DEFAULT_SEED = 19
# A top-k row is a "tie row" when the gap between the k-th and (k+1)-th best valid scores is at most
# this fraction of the row's largest |score| (specs/golden_format.md, "Exact score ties").
TIE_REL = 1e-5


def reference_string() -> str:
    import transformers

    return f"transformers {transformers.__version__}, torch {torch.__version__.split('+')[0]}"


def set_determinism() -> None:
    # One thread: CPU reductions then have one fixed order, so a re-run reproduces the tensors bit for bit.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


# ----------------------------------------------------------------------------------------------------------
# Weight initialisation
# ----------------------------------------------------------------------------------------------------------


@torch.no_grad()
def init_weights(model: torch.nn.Module, gen: torch.Generator, gain: float = 1.0) -> None:
    """Overwrite the weights that matter for attention with values large enough that attention is not uniform
    and indexer scores are not ties.

    * nn.Linear / stacked expert weights: N(0, gain / sqrt(fan_in)), so every projection keeps O(1) activations.
    * embeddings: N(0, 1).
    * RMSNorm-style weights that multiply (w * x): 1 + N(0, 0.1); Gemma-style (1 + w) weights: N(0, 0.1);
      LayerNorm: weight 1 + N(0, 0.1), bias N(0, 0.1).
    * attention sinks: N(0, 1) (non-zero on purpose); DeepSeek-V4 compressor `position_bias` (ape): N(0, 0.5).
    Everything else keeps transformers' own initialisation (hyper-connections, routers, GatedDeltaNet decay
    parameters, vision tower), which is deterministic under torch.manual_seed.
    """

    def normal_(t: torch.Tensor, mean: float, std: float) -> None:
        t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32) * std + mean)

    gemma_norms = {"Qwen4ExpTextRMSNorm"}
    for mod_name, mod in model.named_modules():
        cls = type(mod).__name__
        if isinstance(mod, torch.nn.Linear):
            normal_(mod.weight, 0.0, gain / math.sqrt(mod.in_features))
            if mod.bias is not None:
                normal_(mod.bias, 0.0, 0.1)
        elif isinstance(mod, torch.nn.Embedding):
            normal_(mod.weight, 0.0, 1.0)
        elif isinstance(mod, torch.nn.LayerNorm):
            if mod.weight is not None:
                normal_(mod.weight, 1.0, 0.1)
            if mod.bias is not None:
                normal_(mod.bias, 0.0, 0.1)
        elif cls in gemma_norms:
            normal_(mod.weight, 0.0, 0.1)
        elif cls.endswith("RMSNorm") and isinstance(getattr(mod, "weight", None), torch.nn.Parameter):
            normal_(mod.weight, 1.0, 0.1)
        elif cls.endswith("Experts"):
            for pname in ("gate_up_proj", "down_proj"):
                p = getattr(mod, pname, None)
                if isinstance(p, torch.nn.Parameter) and p.dim() == 3:
                    normal_(p, 0.0, gain / math.sqrt(p.shape[-1]))
        for pname, p in mod.named_parameters(recurse=False):
            if pname == "sinks":
                normal_(p, 0.0, 1.0)
            elif pname == "position_bias":
                normal_(p, 0.0, 0.5)


# ----------------------------------------------------------------------------------------------------------
# Families
# ----------------------------------------------------------------------------------------------------------


@dataclass
class MtpSpec:
    """A family's MTP draft layer (--mtp): where the checkpoint keeps it and which ordinary attention layer kind
    the spec assigns it. The MTP layer j has layer index num_hidden_layers + j; the fixtures have one (j = 0)."""

    count_field: str  # config field with the number of MTP layers (in the text config where that is nested)
    layers_prefix: str  # checkpoint prefix of decoder layer N is f"{layers_prefix}{N}."
    block_prefix: str  # checkpoint prefix of the MTP layer; "{n}" stands for num_hidden_layers
    namespace: str  # every checkpoint tensor whose name starts with this belongs to an MTP layer ("": none)
    # the reference's per-layer config lists: {key: the MTP layer's entry}; None = repeat the entry of the last
    # backbone layer (the MLP kind, outside the captured module)
    layer_entries: dict[str, str | None]
    decoder_layers: Callable[[torch.nn.Module], torch.nn.ModuleList]  # model -> its decoder layers
    kind: str  # for the note: the attention kind the spec assigns the MTP layer, with the spec sections
    prefix_spec: str  # spec sections that name the MTP layer's checkpoint prefix
    # (parameter in the decoder layer module, checkpoint name under block_prefix) stored as BF16 in the checkpoint
    bf16: tuple[tuple[str, str], ...] = ()


@dataclass
class Family:
    name: str  # the checkpoint's model_type, also the fixture directory name
    config: Callable[[], object]  # the fixture's transformers config (eager attention)
    requests: list[int]  # request lengths
    vocab_limit: int  # token ids are drawn from [0, vocab_limit)
    # model -> {layer index: attention module}
    attention_modules: Callable[[torch.nn.Module], dict[int, torch.nn.Module]]
    # how the top-k is captured: "v4_indexer", "dsa_indexer", "hy_attention", "qsa_indexer"
    topk_kind: str
    # model -> {layer index: module whose forward runs the top-k}
    indexer_modules: Callable[[torch.nn.Module], dict[int, torch.nn.Module]]
    note: str
    # context manager factory that patches the reference (hy_v4); applied to the freshly built or loaded model
    patch: Callable[[torch.nn.Module], contextlib.AbstractContextManager] = lambda m: contextlib.nullcontext()
    loader_class: str = ""  # transformers model class: builds the model and reloads the saved checkpoint
    # request lengths of the --raw-topk fixture: short, with early rows that have fewer candidates than k
    raw_topk_requests: list[int] | None = None
    mtp: MtpSpec | None = None  # the MTP layer (--mtp)


# How every fixture was run; then how its topk rows are written (normalised, or --raw-topk's raw rows).
RUN_NOTE = (
    "fp32 weights and compute, eager attention, CPU, one thread; each request run alone as one full-sequence "
    "forward (batch 1, no padding, use_cache=False). input/output = the attention module's hidden-state input "
    "and its returned attention output, captured with forward hooks. "
)
COMMON_NOTE = RUN_NOTE + (
    "topk rows: valid entries in ascending "
    "order, then -1 (the reference emits score order; entries the reference marks invalid or that lie outside "
    "the causal range are written as -1)."
)
RAW_TOPK_NOTE = RUN_NOTE + (
    "topk rows RAW: exactly the indices the "
    "reference's torch.topk returned, in its order (score order), not normalised: on rows with fewer causal "
    "candidates than k they include future positions (DSA) or compressed entries not yet complete "
    "(DeepSeek-V4, taken before transformers' own -1 replacement); readers must treat entries past the token's "
    "causal range as none (golden_format.md). qwen4_exp: the selected groups' tokens in the order torch.topk "
    "ranked the groups, then the open tail, then -1 (its top-k only ever ranks complete visible groups)."
)


def _eager(config):
    config._attn_implementation = "eager"
    return config


# --- DeepSeek-V4 ------------------------------------------------------------------------------------------


def _config_deepseek_v4():
    from transformers import DeepseekV4Config

    cfg = DeepseekV4Config(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        partial_rotary_factor=8 / 32,  # qk_rope_head_dim = 8 (release: 64 of 512)
        q_lora_rank=32,
        o_groups=2,
        o_lora_rank=16,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        sliding_window=8,
        index_n_heads=8,
        index_head_dim=16,
        index_topk=8,
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        # release YaRN parameters; transformers folds them into rope_parameters.compress (attention_factor 1.0)
        rope_parameters={
            "rope_type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 65536,
            "beta_fast": 32,
            "beta_slow": 1,
        },
        max_position_embeddings=1048576,
        rms_norm_eps=1e-2,  # exaggerated so that a wrong eps is visible above the 1e-4 tolerance
        mlp_layer_types=["moe"] * 3,
        n_routed_experts=2,
        n_shared_experts=1,
        num_experts_per_tok=1,
        moe_intermediate_size=8,
        hc_mult=2,
        hc_sinkhorn_iters=3,
        num_nextn_predict_layers=0,
        tie_word_embeddings=False,
    )
    return _eager(cfg)


DEEPSEEK_V4 = Family(
    name="deepseek_v4",
    config=_config_deepseek_v4,
    # 5: p=0..2 no compressed entry, p=3 first CSA entry, p=4 after it (also short-context fallback range);
    # 37: p=7 first entry with the overlap half, window (8) full from p=7 and sliding from p=8, first HCA
    #     entry (ratio 16) at p=15, 37//4 = 9 > index_topk = 8: past the short-context fallback threshold
    #     (max_seq_len <= 35), rows p=35,36 select 8 of 9; 37 % 4 = 1, 37 % 16 = 5 leave open blocks;
    # 150: 37 CSA entries (top-8 of up to 37), 9 HCA entries, 150 % 4 = 2, 150 % 16 = 6.
    requests=[5, 37, 150],
    # 5: K = 1 and rows p = 0..2 see no entry, so torch.topk returns entry 0 before it is complete;
    # 37: rows p < 31 see fewer than 8 entries (future entries), rows p = 35, 36 select 8 of 9.
    raw_topk_requests=[5, 37],
    vocab_limit=64,
    attention_modules=lambda m: {i: layer.self_attn for i, layer in enumerate(m.model.layers)},
    topk_kind="v4_indexer",
    indexer_modules=lambda m: {
        i: layer.self_attn.compressor.indexer
        for i, layer in enumerate(m.model.layers)
        if layer.self_attn.layer_type == "compressed_sparse_attention"
    },
    note=(
        "deepseek_v4: no patch; transformers' DeepseekV4 matches the spec's exact profile (deepseek_v4.md "
        "§3.10). topk = DeepseekV4Indexer output on CSA layers, in compressed-entry ids (entry k pools tokens "
        "4k-4..4k+3), K = min(index_topk, T//4); SWA-only and HCA layers have no topk. "
    ),
    loader_class="DeepseekV4ForCausalLM",
    mtp=MtpSpec(
        count_field="num_nextn_predict_layers",
        layers_prefix="model.layers.",
        block_prefix="mtp.0.",
        namespace="mtp.",
        layer_entries={"layer_types": "sliding_attention", "mlp_layer_types": None},
        decoder_layers=lambda m: m.model.layers,
        kind="a sliding_attention layer (SWA-only, compress ratio 0, main RoPE table: rope_theta, no YaRN; "
        "deepseek_v4.md §1.3, §4.2 'MTP layer = SWA-only')",
        prefix_spec="deepseek_v4.md §6",
    ),
)


# --- DeepSeek-V3.2 ----------------------------------------------------------------------------------------


def _config_deepseek_v32():
    from transformers import DeepseekV32Config

    cfg = DeepseekV32Config(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,  # transformers' DeepseekV32 needs kv heads == heads
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        index_n_heads=8,
        index_head_dim=16,
        index_topk=16,
        # the release's YaRN parameters (HF config.json of DeepSeek-V3.2): the frequency ramp is active for
        # rope dims 8 (low=1, high=3) and the softmax scale gets mscale^2 (mscale_all_dim = 1).
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        max_position_embeddings=163840,
        rms_norm_eps=1e-2,  # not used by q_a/kv_a/k_norm in transformers (fixed 1e-6); exaggerated on purpose
        first_k_dense_replace=2,
        mlp_layer_types=["dense", "dense"],
        intermediate_size=8,
        moe_intermediate_size=16,
        n_routed_experts=4,
        n_group=1,
        topk_group=1,
        num_experts_per_tok=1,
        tie_word_embeddings=False,
    )
    return _eager(cfg)


DEEPSEEK_V32 = Family(
    name="deepseek_v32",
    config=_config_deepseek_v32,
    # 12 <= index_topk (16): sparse == dense; 17: only the last row (p=16) selects 16 of 17;
    # 90: rows p >= 16 select 16 of p+1.
    requests=[12, 17, 90],
    # 12: K = 12, rows p < 11 list future positions; 20: rows p < 15 do, rows p = 16..19 select 16 of p + 1.
    raw_topk_requests=[12, 20],
    vocab_limit=64,
    attention_modules=lambda m: {i: layer.self_attn for i, layer in enumerate(m.model.layers)},
    topk_kind="dsa_indexer",
    indexer_modules=lambda m: {i: layer.self_attn.indexer for i, layer in enumerate(m.model.layers)},
    note=(
        "deepseek_v32: no patch (dsa_mla.md Decisions: follow transformers' DeepseekV32): interleaved RoPE on "
        "the MLA rope slice, NeoX RoPE on the first qk_rope_head_dim dims of each indexer head, latent norms and "
        "k_norm eps 1e-6 fixed (config rms_norm_eps = 1e-2 is NOT used there), YaRN ramp + attention factor "
        "from rope_parameters, softmax scale qk_head_dim^-0.5 * mscale^2. topk = DeepseekV32Indexer output in "
        "token positions, K = min(index_topk, T). "
    ),
    loader_class="DeepseekV32ForCausalLM",
    mtp=MtpSpec(
        count_field="num_nextn_predict_layers",
        layers_prefix="model.layers.",
        block_prefix="model.layers.{n}.",
        namespace="",
        layer_entries={"layer_types": "deepseek_sparse_attention", "mlp_layer_types": None},
        decoder_layers=lambda m: m.model.layers,
        kind="a deepseek_sparse_attention (DSA) layer with its own indexer, as every layer (dsa_mla.md §1.1)",
        prefix_spec="dsa_mla.md §1.1, §6.1",
    ),
)


# --- Hy4 (hy_v4) ------------------------------------------------------------------------------------------


def _hy_rope_interleaved(q, k, cos, sin, unsqueeze_dim=1):
    """Interleaved (GPT-J) RoPE: pair (2i, 2i+1) rotated by p * theta^(-2i/Dr), written back in place.

    `cos`/`sin` come from HYV4RotaryEmbedding as cat(freqs, freqs) over Dr dims; the first half holds the angle
    of pair i.
    """
    half = cos.shape[-1] // 2
    c = cos[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)
    s = sin[..., :half].repeat_interleave(2, dim=-1).unsqueeze(unsqueeze_dim)

    def rot(x):
        x1 = x[..., 0::2]
        x2 = x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    return q * c + rot(q) * s, k * c + rot(k) * s


@contextlib.contextmanager
def _hy_patch(model):
    """Patch transformers' HYV4 reference to the checkpoint conventions of dsa_mla.md ("Decisions for sieve",
    HY V4): interleaved RoPE in the MLA and indexer rope slices; q_a/kv_a RMSNorm eps = rms_norm_eps;
    indexer k_norm (LayerNorm) eps = 1e-6."""
    from transformers.models.hy_v4 import modeling_hy_v4 as mod

    eps = model.config.rms_norm_eps
    saved_rope = mod.apply_rotary_pos_emb
    saved_eps = []
    for layer in model.model.layers:
        attn = layer.self_attn
        saved_eps.append((attn.q_a_layernorm, "variance_epsilon", attn.q_a_layernorm.variance_epsilon))
        saved_eps.append((attn.kv_a_layernorm, "variance_epsilon", attn.kv_a_layernorm.variance_epsilon))
        attn.q_a_layernorm.variance_epsilon = eps
        attn.kv_a_layernorm.variance_epsilon = eps
        if attn.indexer is not None:
            saved_eps.append((attn.indexer.k_norm, "eps", attn.indexer.k_norm.eps))
            attn.indexer.k_norm.eps = 1e-6
    mod.apply_rotary_pos_emb = _hy_rope_interleaved
    try:
        yield
    finally:
        mod.apply_rotary_pos_emb = saved_rope
        for obj, attr, val in saved_eps:
            setattr(obj, attr, val)


def _config_hy_v4():
    from transformers import HYV4Config

    cfg = HYV4Config(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        index_n_heads=8,
        index_head_dim=16,
        index_topk=16,
        # full, shared, full, shared: layer 1 reuses layer 0's top-k, layer 3 reuses layer 2's (not layer 0's)
        indexer_types=["full", "shared", "full", "shared"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        max_position_embeddings=4096,
        rms_norm_eps=1e-2,  # exaggerated so that the patched eps conventions are visible
        mlp_layer_types=["dense"] * 4,
        intermediate_size=8,
        moe_intermediate_size=16,
        n_routed_experts=4,
        num_experts_per_tok=1,
        hc_mult=2,
        learnable_sink_init=0.0,  # overwritten: sinks ~ N(0, 1)
        pad_token_id=None,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
    )
    return _eager(cfg)


HY_V4 = Family(
    name="hy_v4",
    config=_config_hy_v4,
    # as deepseek_v32: 12 <= index_topk (dense), 17 (only p=16 selects), 80 (rows p >= 16 select 16 of p+1)
    requests=[12, 17, 80],
    raw_topk_requests=[12, 20],  # as deepseek_v32
    vocab_limit=64,
    attention_modules=lambda m: {i: layer.self_attn for i, layer in enumerate(m.model.layers)},
    topk_kind="hy_attention",
    indexer_modules=lambda m: {
        i: layer.self_attn.indexer for i, layer in enumerate(m.model.layers) if layer.self_attn.indexer is not None
    },
    note=(
        "hy_v4: transformers' HYV4 PATCHED to the checkpoint conventions of dsa_mla.md (Decisions for sieve, "
        "HY V4): modeling_hy_v4.apply_rotary_pos_emb replaced by interleaved (GPT-J) pairing (2i, 2i+1), angle "
        "p*rope_theta^(-2i/qk_rope_head_dim), written back in place, for the MLA rope slice (q_pe, k_pe) and the "
        "indexer rope slice (the LAST qk_rope_head_dim dims of each indexer head); q_a_layernorm and "
        "kv_a_layernorm eps = config rms_norm_eps (= 1e-2; unpatched transformers: 1e-6); indexer k_norm "
        "LayerNorm eps = 1e-6 (unpatched transformers: rms_norm_eps). Elementwise sigmoid gate, learnable sink "
        "(non-zero), indexer_types full/shared/full/shared. topk = the token positions the layer attended with "
        "(full layers: their indexer's output; shared layers: the closest preceding full layer's), "
        "K = min(index_topk, T). "
    ),
    patch=_hy_patch,
    loader_class="HYV4ForCausalLM",
    mtp=MtpSpec(
        count_field="num_nextn_predict_layers",
        layers_prefix="model.layers.",
        block_prefix="model.mtp_layers.0.",
        namespace="model.mtp_layers.",
        layer_entries={"layer_types": "deepseek_sparse_attention", "indexer_types": "full", "mlp_layer_types": None},
        decoder_layers=lambda m: m.model.layers,
        kind="a deepseek_sparse_attention layer with a FULL indexer (indexer_types entry 'full'; dsa_mla.md §1.3 "
        "'MTP layers always build and run a full indexer')",
        prefix_spec="dsa_mla.md §1.2, §6.2",
        bf16=(("self_attn.sinks", "self_attn.learnable_sink_param"),),
    ),
)


# --- Qwen3.8-Flash-Next QSA (qwen4_exp) ------------------------------------------------------------------


def _config_qwen4_exp():
    from transformers import Qwen4ExpConfig

    text = dict(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=4,
        # hybrid as the real model: GatedDeltaNet linear-attention layers and QSA layers
        layer_types=["linear_attention", "qwen_sparse_attention", "linear_attention", "qwen_sparse_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,  # GQA group size 2
        head_dim=32,
        # partial rotary factor as the real model (0.25 -> rotary_dim 8); text-only so MRoPE is plain 1-D RoPE
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
            "mrope_interleaved": True,
            "mrope_section": [2, 1, 1],
        },
        max_position_embeddings=4096,
        rms_norm_eps=1e-2,  # exaggerated so that a wrong eps is visible above the 1e-4 tolerance
        indexer_n_heads=4,
        indexer_kv_heads=1,
        indexer_head_dim=16,  # >= rotary_dim 8
        indexer_budget=16,  # block_topk 4, row width budget + ratio - 1 = 19
        indexer_compress_ratio=4,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=1,
        linear_num_value_heads=2,
        num_experts=1,
        num_experts_per_tok=1,
        moe_intermediate_size=8,
        shared_expert_intermediate_size=8,
        hc_count=2,
        hc_lowrank=8,
        hidden_act="silu",
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=1,
        hidden_size=16,
        intermediate_size=16,
        num_heads=2,
        patch_size=2,
        temporal_patch_size=2,
        spatial_merge_size=1,
        out_hidden_size=64,
        num_position_embeddings=4,
    )
    cfg = Qwen4ExpConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    _eager(cfg)
    _eager(cfg.text_config)
    _eager(cfg.vision_config)
    return cfg


def _qwen_layers(m):
    return m.model.language_model.layers


QWEN4_EXP = Family(
    name="qwen4_exp",
    config=_config_qwen4_exp,
    # 19 = budget + ratio - 1: every row is exactly dense; 23: rows p >= 19 pick 4 of 5 groups;
    # 100: up to 25 complete groups, 4 picked, plus the open tail.
    requests=[19, 23, 100],
    # 10: tails only and dense rows; 23: rows p = 19..22 pick 4 of 5 groups (in score order).
    raw_topk_requests=[10, 23],
    vocab_limit=64,
    attention_modules=lambda m: {
        i: layer.self_attn for i, layer in enumerate(_qwen_layers(m)) if layer.layer_type == "qwen_sparse_attention"
    },
    topk_kind="qsa_indexer",
    indexer_modules=lambda m: {
        i: layer.self_attn.indexer
        for i, layer in enumerate(_qwen_layers(m))
        if layer.layer_type == "qwen_sparse_attention"
    },
    note=(
        "qwen4_exp: no patch; multimodal checkpoint layout (Qwen4ExpForConditionalGeneration, text weights under "
        "model.language_model., tiny vision tower) as the released model. Only the qwen_sparse_attention layers "
        "are captured (layers 0 and 2 are GatedDeltaNet linear attention). topk = the token positions "
        "Qwen4ExpTextQSAIndexer selected (whole selected groups plus the open tail, i.e. the reference's own "
        "token index space), row width indexer_budget + indexer_compress_ratio - 1 = 19; recovered from the "
        "indexer's returned selection mask. "
    ),
    loader_class="Qwen4ExpForConditionalGeneration",
    mtp=MtpSpec(
        count_field="mtp_num_hidden_layers",
        layers_prefix="model.language_model.layers.",
        block_prefix="mtp.layers.0.",
        namespace="mtp.",
        layer_entries={"layer_types": "qwen_sparse_attention"},
        decoder_layers=_qwen_layers,
        kind="a qwen_sparse_attention (QSA) layer with its own indexer (qsa.md §7)",
        prefix_spec="qsa.md §3",
    ),
)

FAMILIES: dict[str, Family] = {f.name: f for f in (DEEPSEEK_V4, DEEPSEEK_V32, HY_V4, QWEN4_EXP)}


# ----------------------------------------------------------------------------------------------------------
# Running the reference and capturing
# ----------------------------------------------------------------------------------------------------------


class _TopkRecorder:
    """Records the scores, k and returned indices of every Tensor.topk call made while an indexer module runs,
    so that the generator can measure how close each top-k boundary is to a tie, and --raw-topk can keep the
    indices exactly as torch.topk returned them."""

    def __init__(self):
        self.active = None  # layer index of the running indexer
        self.calls: dict[int, list[tuple[torch.Tensor, int, torch.Tensor]]] = {}
        self._orig = None

    def __enter__(self):
        self._orig = torch.Tensor.topk
        rec = self
        orig = self._orig

        def topk(t, k, *args, **kwargs):
            out = orig(t, k, *args, **kwargs)
            if rec.active is not None:
                rec.calls.setdefault(rec.active, []).append((t.detach().clone(), int(k), out.indices.detach().clone()))
            return out

        torch.Tensor.topk = topk
        return self

    def __exit__(self, *exc):
        torch.Tensor.topk = self._orig


def _hidden_arg(args, kwargs):
    if args:
        return args[0]
    return kwargs["hidden_states"]


def _sorted_rows(idx: torch.Tensor, limit: torch.Tensor, width: int) -> torch.Tensor:
    """idx [T, K] int; entries < 0 or >= limit[t] become -1; each row: valid entries ascending, then -1."""
    T = idx.shape[0]
    out = torch.full((T, width), -1, dtype=torch.int32)
    for t in range(T):
        row = idx[t].to(torch.int64)
        row = row[(row >= 0) & (row < int(limit[t]))]
        vals = torch.unique(row)  # sorted ascending
        if vals.numel() != row.numel():
            raise RuntimeError(f"duplicate indices in reference top-k row {t}: {idx[t].tolist()}")
        out[t, : vals.numel()] = vals.to(torch.int32)
    return out


def _raw_qsa_rows(calls: list, T: int, r: int, block_topk: int, width: int, selected: torch.Tensor) -> torch.Tensor:
    """QSA rows as the reference builds them before turning them into a mask (Qwen4ExpTextQSAIndexer.forward):
    the tokens of the groups torch.topk picked, in its order, then the open tail, then -1. One recorded top-k
    call per row with a complete group, in row order; a text-only causal row t sees tokens 0..t, so group g is
    tokens g*r .. g*r+r-1. Each row's set is checked against the reference's returned mask `selected` [T, T]."""
    rows = torch.full((T, width), -1, dtype=torch.int32)
    n_calls = 0
    for t in range(T):
        complete = (t + 1) // r
        tokens = []
        if complete > 0:
            _, k, idx = calls[n_calls]
            n_calls += 1
            if k != min(block_topk, complete) or idx.numel() != k:
                raise RuntimeError(f"QSA row {t}: top-k call of k={k} over {complete} groups")
            tokens = [int(g) * r + j for g in idx.tolist() for j in range(r)]
        tokens += list(range(complete * r, t + 1))
        if sorted(tokens) != torch.nonzero(selected[t]).flatten().tolist():
            raise RuntimeError(f"QSA row {t}: rebuilt row {tokens} differs from the reference's selection mask")
        rows[t, : len(tokens)] = torch.tensor(tokens, dtype=torch.int32)
    if n_calls != len(calls):
        raise RuntimeError(f"QSA: {len(calls)} top-k calls for {n_calls} rows with a complete group")
    return rows


def run_reference(fam: Family, model: torch.nn.Module, input_ids: list[int], use_cache: bool = False,
                  raw_topk: bool = False) -> dict:
    """Run one request through `model` (already patched by the caller) and return its captured tensors:
    {"input": {L: [T, H]}, "output": {L: [T, H]}, "topk": {L: [T, K]}, "score_calls": {L: [(scores, k, indices)]}}.
    raw_topk: "topk" holds the reference's raw rows (see RAW_TOPK_NOTE) instead of normalised ones."""
    T = len(input_ids)
    attn = fam.attention_modules(model)
    idxm = fam.indexer_modules(model)
    cap = {"input": {}, "output": {}, "topk": {}, "raw_topk": {}}
    handles = []
    recorder = _TopkRecorder()

    def attn_hook(L):
        def hook(mod, args, kwargs, out):
            cap["input"][L] = _hidden_arg(args, kwargs).detach()[0].clone()
            cap["output"][L] = out[0].detach()[0].clone()
            if fam.topk_kind == "hy_attention":
                cap["raw_topk"][L] = out[2].detach()[0].clone()

        return hook

    def idx_pre(L):
        def hook(mod, args, kwargs):
            recorder.active = L

        return hook

    def idx_post(L):
        def hook(mod, args, kwargs, out):
            recorder.active = None
            if fam.topk_kind in ("v4_indexer", "dsa_indexer"):
                cap["raw_topk"][L] = out.detach()[0].clone()
            elif fam.topk_kind == "qsa_indexer":
                cap["raw_topk"][L] = out.detach()[0, 0].clone()  # [T, T] selection mask (0 = selected)

        return hook

    for L, m in attn.items():
        impl = m.config._attn_implementation
        if impl != "eager":
            raise RuntimeError(f"layer {L}: attention implementation is {impl!r}, the goldens need 'eager'")
        handles.append(m.register_forward_hook(attn_hook(L), with_kwargs=True))
    for L, m in idxm.items():
        handles.append(m.register_forward_pre_hook(idx_pre(L), with_kwargs=True))
        handles.append(m.register_forward_hook(idx_post(L), with_kwargs=True))
    try:
        with recorder, torch.no_grad():
            ids = torch.tensor([input_ids], dtype=torch.long)
            model(input_ids=ids, use_cache=use_cache)
    finally:
        for h in handles:
            h.remove()

    pos = torch.arange(T)
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    for L, raw in cap["raw_topk"].items():
        if raw_topk:
            cap["topk"][L] = _raw_rows(fam, cfg, L, raw, recorder.calls, T).contiguous()
        elif fam.topk_kind == "v4_indexer":
            m = cfg.compress_rates["compressed_sparse_attention"]
            cap["topk"][L] = _sorted_rows(raw, (pos + 1) // m, raw.shape[-1])
        elif fam.topk_kind in ("dsa_indexer", "hy_attention"):
            cap["topk"][L] = _sorted_rows(raw, pos + 1, raw.shape[-1])
        elif fam.topk_kind == "qsa_indexer":
            width = cfg.indexer_budget + cfg.indexer_compress_ratio - 1
            sel = raw if raw.dtype == torch.bool else raw == 0  # bool mask (sdpa) or additive mask (eager)
            rows = torch.full((T, width), -1, dtype=torch.int32)
            for t in range(T):
                nz = torch.nonzero(sel[t]).flatten()
                if nz.numel() > width or (nz.numel() and int(nz.max()) > t):
                    raise RuntimeError(f"unexpected QSA selection in row {t}: {nz.tolist()}")
                rows[t, : nz.numel()] = nz.to(torch.int32)
            cap["topk"][L] = rows
    cap["score_calls"] = recorder.calls
    del cap["raw_topk"]
    return cap


def _raw_rows(fam: Family, cfg, L: int, out: torch.Tensor, calls: dict, T: int) -> torch.Tensor:
    """The raw top-k rows of layer L (RAW_TOPK_NOTE) from what its module returned (`out`) and the top-k
    calls recorded while its indexer ran."""
    if fam.topk_kind == "qsa_indexer":
        width = cfg.indexer_budget + cfg.indexer_compress_ratio - 1
        sel = out if out.dtype == torch.bool else out == 0
        r = cfg.indexer_compress_ratio
        return _raw_qsa_rows(calls.get(L, []), T, r, cfg.indexer_budget // r, width, sel)
    if fam.topk_kind == "v4_indexer":
        # transformers replaces entries past (p+1)//m by -1 after its torch.topk; keep what torch.topk gave
        # and check that the replacement is the only difference.
        if len(calls.get(L, [])) != 1:
            raise RuntimeError(f"layer {L}: expected one top-k call, got {len(calls.get(L, []))}")
        raw = calls[L][0][2][0].to(torch.int32)
        m = cfg.compress_rates["compressed_sparse_attention"]
        limit = ((torch.arange(T) + 1) // m).unsqueeze(-1)
        if not torch.equal(torch.where(raw >= limit, -1, raw), out.to(torch.int32)):
            raise RuntimeError(f"layer {L}: the indexer's output is not its top-k with future entries as -1")
        return raw
    return out.to(torch.int32)  # DSA (and hy_v4 shared layers): the indexer returns torch.topk's indices as they are


def count_noncausal(fam: Family, cfg, tensors: dict[str, torch.Tensor]) -> int:
    """Entries >= 0 of the .topk rows that lie past their token's causal range."""
    m = cfg.compress_rates["compressed_sparse_attention"] if fam.topk_kind == "v4_indexer" else 1
    n = 0
    for name, t in tensors.items():
        if name.endswith(".topk"):
            limit = ((torch.arange(t.shape[0]) + 1) // m).unsqueeze(-1)
            n += int(((t >= 0) & (t >= limit)).sum())
    return n


def tie_stats(fam: Family, model: torch.nn.Module, T: int, score_calls: dict) -> dict[int, dict]:
    """Per indexer layer: rows where selection happened (more valid candidates than k), tie rows (boundary gap
    <= TIE_REL * max|score|), exact-zero boundary rows, degenerate rows (all valid scores equal), the smallest
    relative boundary gap."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    stats = {}
    for L, calls in score_calls.items():
        rows = []  # (valid scores 1-D, k)
        if fam.topk_kind == "qsa_indexer":
            # one call per query row with >= 1 complete group, in row order
            r = cfg.indexer_compress_ratio
            first = r - 1
            for i, (s, k, _) in enumerate(calls):
                rows.append((first + i, s.flatten(), k))
        else:
            if len(calls) != 1:
                raise RuntimeError(f"layer {L}: expected one top-k call, got {len(calls)}")
            s, k, _ = calls[0]
            s = s[0]  # [T, N]
            for t in range(T):
                if fam.topk_kind == "v4_indexer":
                    n = (t + 1) // cfg.compress_rates["compressed_sparse_attention"]
                else:
                    n = t + 1
                rows.append((t, s[t, :n], min(k, n)))
        st = {"selecting_rows": 0, "tie_rows": 0, "zero_boundary_rows": 0, "degenerate_rows": 0,
              "min_rel_gap": float("inf"), "tie_row_ids": []}
        for t, v, k in rows:
            if v.numel() > 1 and bool((v == v[0]).all()):
                st["degenerate_rows"] += 1
            if v.numel() <= k:
                continue
            st["selecting_rows"] += 1
            sv = torch.sort(v.double(), descending=True).values
            gap = float(sv[k - 1] - sv[k])
            scale = float(sv.abs().max())
            rel = gap / scale if scale > 0 else 0.0
            st["min_rel_gap"] = min(st["min_rel_gap"], rel)
            if rel <= TIE_REL:
                st["tie_rows"] += 1
                st["tie_row_ids"].append(t)
            if float(sv[k - 1]) == 0.0 and float(sv[k]) == 0.0:
                st["zero_boundary_rows"] += 1
        stats[L] = st
    return stats


def make_input_ids(fam: Family, seed: int, raw_topk: bool = False) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed + 1)
    lengths = fam.raw_topk_requests if raw_topk else fam.requests
    return [torch.randint(0, fam.vocab_limit, (T,), generator=g).tolist() for T in lengths]


def build_model(fam: Family, seed: int, config=None) -> torch.nn.Module:
    """The family's model (or one with `config`) with init_weights under `seed`."""
    import transformers

    torch.manual_seed(seed)
    cls = getattr(transformers, fam.loader_class)
    model = cls(fam.config() if config is None else config).float().eval()
    gen = torch.Generator().manual_seed(seed)
    init_weights(model, gen)
    return model


def load_model(fam: Family, ckpt_dir: str) -> torch.nn.Module:
    import transformers

    cls = getattr(transformers, fam.loader_class)
    model = cls.from_pretrained(ckpt_dir, dtype=torch.float32, attn_implementation="eager")
    return model.float().eval()


# ----------------------------------------------------------------------------------------------------------
# MTP fixtures (--mtp)
# ----------------------------------------------------------------------------------------------------------
#
# transformers has no MTP module. The MTP fixture's reference is the family's fixture model with one more
# decoder layer n = num_hidden_layers, of the attention kind the spec assigns the MTP layer (MtpSpec.kind).
# Its checkpoint is that model's save_pretrained output rewritten as an n-layer checkpoint with one MTP layer:
# config num_hidden_layers = n, the per-layer lists without entry n, MtpSpec.count_field = 1, and every tensor
# of layer n moved from f"{layers_prefix}{n}." to block_prefix (MtpSpec.bf16 tensors stored as BF16). Both
# scripts rebuild the (n+1)-layer reference from those files with mtp_reference_config/mtp_reference_tensors.


def text_config_dict(cfg: dict) -> dict:
    """The part of a config.json dict that holds num_hidden_layers and the per-layer lists."""
    return cfg["text_config"] if "text_config" in cfg else cfg


def write_config_json(path: str, cfg: dict) -> None:
    """As transformers writes config.json (PreTrainedConfig.to_json_file)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def mtp_reference_config(fam: Family, cfg: dict) -> dict:
    """config.json dict of an MTP checkpoint (n layers, one MTP layer) -> the (n+1)-layer reference's:
    num_hidden_layers n + 1, the per-layer lists extended by the MTP layer's entries (MtpSpec.layer_entries)."""
    spec = fam.mtp
    cfg = copy.deepcopy(cfg)
    tc = text_config_dict(cfg)
    n = tc["num_hidden_layers"]
    if tc.get(spec.count_field) != 1:
        raise ValueError(f"config {spec.count_field} is {tc.get(spec.count_field)!r}; MTP fixtures have 1 MTP layer")
    for key, entry in spec.layer_entries.items():
        entries = tc.get(key)
        if not isinstance(entries, list) or len(entries) != n:
            raise ValueError(f"config {key} is not a list of num_hidden_layers = {n} entries")
        entries.append(entries[-1] if entry is None else entry)
    tc["num_hidden_layers"] = n + 1
    return cfg


def mtp_checkpoint_config(fam: Family, cfg: dict) -> dict:
    """The inverse of mtp_reference_config: (n+1)-layer config.json dict -> the MTP checkpoint's."""
    spec = fam.mtp
    cfg = copy.deepcopy(cfg)
    tc = text_config_dict(cfg)
    n = tc["num_hidden_layers"] - 1
    for key, entry in spec.layer_entries.items():
        entries = tc[key]
        expected = entries[-2] if entry is None else entry
        if len(entries) != n + 1 or entries[-1] != expected:
            raise ValueError(f"config {key} = {entries}: the last entry is not the MTP layer's ({expected!r})")
        del entries[-1]
    tc["num_hidden_layers"] = n
    tc[spec.count_field] = 1
    return cfg


def _layer_index(spec: MtpSpec, name: str) -> int | None:
    if not name.startswith(spec.layers_prefix):
        return None
    head = name[len(spec.layers_prefix):].split(".", 1)[0]
    return int(head) if head.isdigit() else None


def mtp_checkpoint_tensors(fam: Family, n: int, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The (n+1)-layer model's tensors (as save_pretrained wrote them) -> the MTP checkpoint's: every tensor of
    layer n renamed to the MTP block prefix, MtpSpec.bf16 tensors stored as BF16 (their values must be
    bf16-representable already)."""
    spec = fam.mtp
    src = f"{spec.layers_prefix}{n}."
    dst = spec.block_prefix.format(n=n)
    bf16 = {dst + name for _, name in spec.bf16}
    out = {}
    for name, t in tensors.items():
        if spec.namespace and name.startswith(spec.namespace):
            raise ValueError(f"{name}: the (n+1)-layer model already has a tensor under {spec.namespace}")
        if _layer_index(spec, name) is not None and _layer_index(spec, name) > n:
            raise ValueError(f"{name}: a decoder layer past the MTP layer {n}")
        if name.startswith(src):
            name = dst + name[len(src):]
        if name in bf16:
            b = t.to(torch.bfloat16)
            if not torch.equal(b.to(t.dtype), t):
                raise ValueError(f"{name}: values not bf16-representable")
            t = b
        out[name] = t
    if bf16 - out.keys():
        raise ValueError(f"missing {sorted(bf16 - out.keys())}")
    if not any(name.startswith(dst) for name in out):
        raise ValueError(f"no tensor of layer {n}")
    return out


def mtp_reference_tensors(fam: Family, n: int, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of mtp_checkpoint_tensors: the MTP checkpoint's tensors -> the (n+1)-layer reference's, all
    F32. Raises on a tensor that the reference would ignore or not know: an MTP tensor outside the one MTP
    block, a decoder layer >= n (other than the MTP layer itself), a dtype other than F32 (BF16 where
    MtpSpec.bf16 says)."""
    spec = fam.mtp
    src = spec.block_prefix.format(n=n)
    dst = f"{spec.layers_prefix}{n}."
    bf16 = {src + name for _, name in spec.bf16}
    out = {}
    for name, t in tensors.items():
        if name.startswith(src):
            new = dst + name[len(src):]
        elif spec.namespace and name.startswith(spec.namespace):
            raise ValueError(f"{name}: an MTP tensor outside the MTP layer {src}* (the fixtures have one MTP layer)")
        elif _layer_index(spec, name) is not None and _layer_index(spec, name) >= n:
            raise ValueError(f"{name}: decoder layer {_layer_index(spec, name)} >= num_hidden_layers {n}")
        else:
            new = name
        want = torch.bfloat16 if name in bf16 else torch.float32
        if t.dtype != want:
            raise ValueError(f"{name}: dtype {t.dtype}, expected {want}")
        out[new] = t.to(torch.float32)
    if bf16 - tensors.keys():
        raise ValueError(f"missing {sorted(bf16 - tensors.keys())}")
    if not any(name.startswith(dst) for name in out):
        raise ValueError(f"no tensor under the MTP prefix {src}")
    return out


def read_safetensors(path: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, (f.metadata() or {})


def build_mtp_model(fam: Family, seed: int) -> torch.nn.Module:
    """The (n+1)-layer reference: the family's fixture config with the MTP layer appended as layer n, weights
    as build_model (same seed); MtpSpec.bf16 parameters of layer n rounded to bf16 values in place."""
    cfg0 = fam.config()
    cfg = json.loads(cfg0.to_json_string())
    text_config_dict(cfg)[fam.mtp.count_field] = 1
    ref = type(cfg0).from_dict(mtp_reference_config(fam, cfg))
    for c in (ref, ref.get_text_config(), getattr(ref, "vision_config", None)):
        if c is not None:
            _eager(c)
    model = build_model(fam, seed, ref)
    n = text_config_dict(cfg)["num_hidden_layers"]
    layer = fam.mtp.decoder_layers(model)[n]
    with torch.no_grad():
        for pname, _ in fam.mtp.bf16:
            p = layer.get_parameter(pname)
            p.copy_(p.to(torch.bfloat16).to(p.dtype))
    return model


def save_mtp_checkpoint(fam: Family, model: torch.nn.Module, ckpt_dir: str) -> int:
    """save_pretrained the (n+1)-layer reference and write it into ckpt_dir as an n-layer checkpoint with one
    MTP layer (config.json + model.safetensors, the writers transformers uses); returns n."""
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        with open(os.path.join(tmp, "config.json")) as f:
            cfg = json.load(f)
        tensors, st_metadata = read_safetensors(os.path.join(tmp, "model.safetensors"))
    ckpt_cfg = mtp_checkpoint_config(fam, cfg)
    n = text_config_dict(ckpt_cfg)["num_hidden_layers"]
    write_config_json(os.path.join(ckpt_dir, "config.json"), ckpt_cfg)
    save_file(mtp_checkpoint_tensors(fam, n, tensors), os.path.join(ckpt_dir, "model.safetensors"),
              metadata=st_metadata)
    for name in os.listdir(ckpt_dir):
        os.chmod(os.path.join(ckpt_dir, name), 0o644)
    return n


def load_mtp_model(fam: Family, ckpt_dir: str) -> torch.nn.Module:
    """The (n+1)-layer reference from an MTP checkpoint: its files rewritten as the (n+1)-layer model's
    (mtp_reference_config, mtp_reference_tensors) into a temporary directory and loaded from there with
    from_pretrained; any tensor the model lacks, does not know or has in another shape is an error."""
    import transformers
    from safetensors.torch import save_file

    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = json.load(f)
    n = text_config_dict(cfg)["num_hidden_layers"]
    tensors, st_metadata = read_safetensors(os.path.join(ckpt_dir, "model.safetensors"))
    cls = getattr(transformers, fam.loader_class)
    with tempfile.TemporaryDirectory() as tmp:
        write_config_json(os.path.join(tmp, "config.json"), mtp_reference_config(fam, cfg))
        save_file(mtp_reference_tensors(fam, n, tensors), os.path.join(tmp, "model.safetensors"),
                  metadata=st_metadata)
        try:
            model, info = cls.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager",
                                              output_loading_info=True)
        except RuntimeError as e:  # e.g. a tensor of another shape
            raise ValueError(f"the (n+1)-layer reference does not load from the MTP checkpoint: {e}") from e
    problems = {k: sorted(map(str, v))[:8] for k, v in info.items() if v}
    if problems:
        raise ValueError(f"the (n+1)-layer reference does not load cleanly from the MTP checkpoint: {problems}")
    if len(fam.mtp.decoder_layers(model)) != n + 1:
        raise ValueError(f"the reference has {len(fam.mtp.decoder_layers(model))} layers, expected {n + 1}")
    return model.float().eval()


def mtp_note(fam: Family, n: int) -> str:
    spec = fam.mtp
    block = spec.block_prefix.format(n=n)
    src = f"{spec.layers_prefix}{n}."
    where = (f"the tensors under {block} (the checkpoint names the MTP layer as decoder layer num_hidden_layers)"
             if block == src else f"the tensors under {block}, renamed to {src}")
    ignored = ("its DeepseekV32 skips only model.layers.61.* (the release's MTP layer) on load, so it reports "
               f"this checkpoint's {block}* as unexpected" if fam.name == "deepseek_v32"
               else "ignores the MTP weights on load")
    note = (
        f"MTP fixture (make_golden.py --mtp): layer {n} = num_hidden_layers is the checkpoint's MTP layer "
        f"({block}*, {spec.prefix_spec}; config {spec.count_field} = 1; metadata mtp_layers). No reference "
        f"implementation runs MTP layers: transformers has no MTP module and {ignored}. Layer {n}'s golden is "
        f"transformers' own attention module of the kind the spec assigns the MTP layer, {spec.kind}, loaded "
        f"with the MTP layer's weights ({where}), as the last layer of a {n + 1}-layer model whose layers "
        f"0..{n - 1} are this checkpoint's; its input is what that model's layer {n - 1} passes on, not the MTP "
        f"block's own input (the layer check is teacher-forced); its MLP kind repeats layer {n - 1}'s. "
        f"Layers 0..{n - 1} are captured as in the normal fixture, with this checkpoint's weights, which are not "
        f"all the normal fixture's: with one layer more, the final norm and head and some tensors that "
        f"transformers initialises itself (hyper-connection, router weights) are drawn differently. "
    )
    if spec.bf16:
        names = ", ".join(block + name for _, name in spec.bf16)
        note += (f"{names} is stored as BF16 (the main layers' as F32, dsa_mla.md §1.2); the reference's value "
                 f"was rounded to bf16 before the run, so it uses exactly what the BF16 tensor holds. ")
    return note


def capture_all(fam: Family, model: torch.nn.Module, input_ids: list[list[int]], use_cache: bool = False,
                raw_topk: bool = False):
    """Run every request (with the family's patch applied) and return (tensors, stats)."""
    tensors: dict[str, torch.Tensor] = {}
    stats = []
    with fam.patch(model):
        for r, ids in enumerate(input_ids):
            T = len(ids)
            cap = run_reference(fam, model, ids, use_cache=use_cache, raw_topk=raw_topk)
            tensors[f"req{r}.positions"] = torch.arange(T, dtype=torch.int64)
            for L in sorted(cap["input"]):
                tensors[f"req{r}.layer{L}.input"] = cap["input"][L].to(torch.float32).contiguous()
                tensors[f"req{r}.layer{L}.output"] = cap["output"][L].to(torch.float32).contiguous()
            for L in sorted(cap["topk"]):
                tensors[f"req{r}.layer{L}.topk"] = cap["topk"][L].contiguous()
            stats.append(tie_stats(fam, model, T, cap["score_calls"]))
    return tensors, stats


def _stats_text(stats) -> str:
    parts = []
    for r, per_layer in enumerate(stats):
        for L, st in sorted(per_layer.items()):
            gap = st["min_rel_gap"]
            gap_s = "n/a" if gap == float("inf") else f"{gap:.2e}"
            parts.append(
                f"req{r}.layer{L}: {st['selecting_rows']} selecting rows, {st['tie_rows']} tie rows "
                f"(gap <= {TIE_REL:g} x max|score|), {st['zero_boundary_rows']} exact-zero boundaries, "
                f"{st['degenerate_rows']} all-equal rows, min relative gap {gap_s}"
            )
    return "; ".join(parts)


_ST_DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}


def write_safetensors(path: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Write a safetensors file with a reproducible byte layout: header keys in sorted order ("__metadata__"
    first), tensor data in name order, header padded with spaces to a multiple of 8 bytes. (safetensors'
    own writer orders the metadata map arbitrarily, so regenerating would change the file's bytes.)"""
    header: dict = {"__metadata__": dict(sorted(metadata.items()))}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes()  # little-endian on every supported host
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for b in blobs:
            f.write(b)


def generate(fam: Family, out_root: str, seed: int, raw_topk: bool = False, mtp: bool = False) -> None:
    if mtp and (raw_topk or fam.mtp is None):
        raise ValueError(f"{fam.name}: --mtp " + ("does not combine with --raw-topk" if raw_topk else "not defined"))
    set_determinism()
    fix_dir = os.path.join(out_root, fam.name)
    ckpt_dir = os.path.join(fix_dir, "ckpt")
    if os.path.isdir(fix_dir):
        shutil.rmtree(fix_dir)
    os.makedirs(ckpt_dir)

    if mtp:
        # the (n+1)-layer reference, saved as an n-layer checkpoint with one MTP layer (see "MTP fixtures")
        mtp_layer = save_mtp_checkpoint(fam, build_mtp_model(fam, seed), ckpt_dir)
    else:
        model = build_model(fam, seed)
        model.save_pretrained(ckpt_dir)
        # The fixture layout is config.json + model.safetensors; save_pretrained also writes a generation config.
        gen_cfg = os.path.join(ckpt_dir, "generation_config.json")
        if os.path.exists(gen_cfg):
            os.remove(gen_cfg)
        for name in os.listdir(ckpt_dir):  # save_pretrained creates the weights file with mode 0600
            os.chmod(os.path.join(ckpt_dir, name), 0o644)

    # Capture from the model as reloaded from the saved checkpoint, so the goldens are exactly what the files
    # on disk produce.
    model = load_mtp_model(fam, ckpt_dir) if mtp else load_model(fam, ckpt_dir)
    input_ids = make_input_ids(fam, seed, raw_topk)
    tensors, stats = capture_all(fam, model, input_ids, raw_topk=raw_topk)

    ties = sum(st["tie_rows"] for per in stats for st in per.values())
    degenerate = sum(st["degenerate_rows"] for per in stats for st in per.values())
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    noncausal = count_noncausal(fam, cfg, tensors)
    note = fam.note + (RAW_TOPK_NOTE + f" {noncausal} entries past their token's causal range."
                       if raw_topk else COMMON_NOTE)
    if mtp:
        note += " " + mtp_note(fam, mtp_layer).strip()
    metadata = {
        "format": FORMAT,
        "family": fam.name,
        "reference": reference_string(),
        "requests": str(len(input_ids)),
        "note": note + " Indexer boundary statistics: " + _stats_text(stats) + ".",
        "generator": f"tools/golden/make_golden.py --family {fam.name} --seed {seed}"
        + (" --raw-topk" if raw_topk else "") + (" --mtp" if mtp else ""),
        "input_ids": json.dumps(input_ids, separators=(",", ":")),
    }
    if raw_topk:
        metadata["topk_rows"] = "raw"
    if mtp:
        metadata["mtp_layers"] = str(mtp_layer)
    write_safetensors(os.path.join(fix_dir, "golden.safetensors"), tensors, metadata)

    size = 0
    for root, _, files in os.walk(fix_dir):
        size += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    lengths = [len(ids) for ids in input_ids]
    print(f"{fam.name}: {len(input_ids)} requests {lengths}, {len(tensors)} tensors, {size} bytes in {fix_dir}")
    print(f"  {_stats_text(stats)}")
    if raw_topk:
        print(f"  raw top-k rows: {noncausal} entries past their token's causal range")
    if mtp:
        mtp_stats = [{L: st for L, st in per.items() if L == mtp_layer} for per in stats]
        print(f"  MTP layer {mtp_layer}: " + (_stats_text(mtp_stats) or "no indexer"))
    if ties or degenerate:
        print(f"  WARNING: {ties} tie rows, {degenerate} all-equal rows (pick another --seed to avoid them)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, choices=[*FAMILIES, "all"])
    ap.add_argument("--out", required=True, help="output root; fixtures go to OUT/<family>/")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--raw-topk", action="store_true",
                    help="keep the reference's raw top-k rows (RAW_TOPK_NOTE) and use the families' short "
                         "raw_topk_requests")
    ap.add_argument("--mtp", action="store_true",
                    help="MTP fixtures: the reference gets the family's MTP layer as layer num_hidden_layers, the "
                         "checkpoint keeps it under the MTP prefix (see 'MTP fixtures' in this file)")
    args = ap.parse_args(argv)
    if args.mtp and args.raw_topk:
        ap.error("--mtp and --raw-topk do not combine")
    names = list(FAMILIES) if args.family == "all" else [args.family]
    for name in names:
        generate(FAMILIES[name], args.out, args.seed, raw_topk=args.raw_topk, mtp=args.mtp)
    return 0


if __name__ == "__main__":
    sys.exit(main())

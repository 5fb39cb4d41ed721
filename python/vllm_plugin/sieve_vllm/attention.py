"""sieve as the attention of a vLLM model: the caches are vLLM's, sieve steps the layers over them.

One ``SieveStack`` per model loads the checkpoint's attention layers into ``sieve.AttentionModel``
(caches="caller"). Each decoder layer's attention is a ``SieveAttention`` module that owns, for every
sieve cache group, one ``SieveCacheLayer``: a vLLM attention layer whose KV cache spec asks for
exactly sieve's block (``cache_specs``: block_size entries of entry_bytes), so that vLLM allocates,
accounts, schedules and frees the cache blocks, and hands each step's block tables over in its
attention metadata (``SieveMetadataBuilder`` passes vLLM's ``CommonAttentionMetadata`` through: no
Triton, which vLLM's CPU wheel lacks). At the first attention layer of a forward pass the stack
begins sieve's step from that metadata (query_start_loc, positions, one block table per group); at
the last it ends it. Requests therefore live for one step in sieve: vLLM's scheduler, preemption and
block tables stay the only record of them.

Attention runs inside the custom op ``torch.ops.vllm.sieve_attention``, opaque to torch.compile: a
graph traced during vLLM's warmup (no metadata, zeros) must not freeze that branch.
"""

from __future__ import annotations

import itertools
import re

import torch
from torch import nn

import sieve
from vllm.config import VllmConfig, get_current_vllm_config
from vllm.forward_context import get_forward_context
from vllm.logger import init_logger
from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
from vllm.utils.torch_utils import direct_register_custom_op
from vllm.v1.attention.backend import AttentionBackend, AttentionMetadataBuilder
from vllm.v1.kv_cache_interface import MLAAttentionSpec, SlidingWindowMLASpec

from .platform import PREFIX_CACHING_VERIFIED

log = init_logger("vllm.sieve_vllm")  # vLLM's handler and level

_ATTENTION: dict[int, "SieveAttention"] = {}  # the custom op finds its module by this key
_KEYS = itertools.count()


def _sieve_attention(hidden_states: torch.Tensor, positions: torch.Tensor, key: int) -> torch.Tensor:
    return _ATTENTION[key].attend(positions, hidden_states)


def _sieve_attention_fake(hidden_states: torch.Tensor, positions: torch.Tensor, key: int) -> torch.Tensor:
    return torch.empty_like(hidden_states)


direct_register_custom_op(op_name="sieve_attention", op_func=_sieve_attention, mutates_args=[],
                          fake_impl=_sieve_attention_fake)


class SieveMetadataBuilder(AttentionMetadataBuilder):
    """The step's metadata of a sieve cache group: vLLM's common metadata itself."""

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        return common_attn_metadata


class SieveBackend(AttentionBackend):
    """What vLLM asks of a cache layer's backend; sieve's kernels are reached through the stack."""

    @staticmethod
    def get_name():
        return "SIEVE"

    @staticmethod
    def get_impl_cls():
        raise NotImplementedError("sieve's attention runs through SieveAttention, not an AttentionImpl")

    @staticmethod
    def get_builder_cls():
        return SieveMetadataBuilder


class SieveCacheLayer(nn.Module, AttentionLayerBase):
    """One layer's cache of one sieve cache group, allocated by vLLM: [num_blocks, ...] uint8 blocks of
    block_tokens tokens, an entry of entry_bytes per tokens_per_entry tokens."""

    def __init__(self, stack: "SieveStack", prefix: str, layer: int, spec: dict):
        super().__init__()
        self._stack = [stack]  # a list: not an nn.Module attribute
        self.prefix = prefix
        self.layer = layer
        self.entry_bytes = spec["entry_bytes"]
        self.tokens_per_entry = spec["tokens_per_entry"]
        self.block_tokens = SieveStack.block_tokens(spec)
        self.window_tokens = spec["window_tokens"]
        self.kv_cache = torch.tensor([])
        context = get_current_vllm_config().compilation_config.static_forward_context
        if prefix in context:
            raise ValueError(f"duplicate layer name {prefix}")
        context[prefix] = self

    def get_kv_cache_spec(self, vllm_config: VllmConfig):
        # page = (block_size / tokens_per_state) · num_kv_heads · head_size · 1 byte = sieve's block, padded
        # to the stack's common page where the model has several kinds of page (SieveStack.page_bytes).
        geometry = dict(block_size=self.block_tokens, tokens_per_state=self.tokens_per_entry, num_kv_heads=1,
                        head_size=self.entry_bytes, dtype=torch.uint8,
                        page_size_padded=self._stack[0].page_bytes(vllm_config))
        if self.window_tokens > 0:
            # sieve reads a windowed group (DeepSeek-V4's SWA rows and compressor states, QSA's key ring)
            # only for the last window_tokens tokens before the step, as its own pools keep them
            # (runtime/cache_pools.cpp releases entries before tokens_done - window_tokens). vLLM's
            # sliding-window manager keeps the last sliding_window - 1 computed tokens
            # (v1/kv_cache_interface.py SlidingWindowSpec), gives older blocks back and sizes the pool by the
            # window rather than max_model_len: otherwise 8-token compressor-state blocks would hold every
            # position of every request.
            return SlidingWindowMLASpec(sliding_window=self.window_tokens + 1, **geometry)
        return MLAAttentionSpec(**geometry)

    def get_attn_backend(self):
        return SieveBackend

    def bind_kv_cache(self, kv_cache: torch.Tensor) -> None:
        self.kv_cache = kv_cache


_CACHE_LAYER = re.compile(r"\.sieve_([^.]+)$")  # SieveCacheLayer prefixes: f"{attention prefix}.sieve_{group}"


def install_kv_cache_grouping() -> None:
    """Keeps every sieve cache group in one vLLM KV cache group (from ``register()``: the EngineCore
    process groups the layers).

    sieve takes one block table per cache group for all of the group's layers (``begin_step``), but
    vLLM's ``_get_kv_cache_groups_uniform_page_size`` (``v1/core/kv_cache_utils.py:1362-1502``) splits
    spec buckets of unequal layer counts into vLLM groups of the smallest count, each with its own block
    table: DeepSeek-V4's 3-layer ``swa_kv`` beside the 1-layer CSA/HCA groups became three groups. Where
    that would split a sieve group and every layer is sieve's, the groups are the sieve groups themselves
    (vLLM allocates each group's layers their own tensors, so unequal counts cost no padding); the
    grouping vLLM chooses is kept wherever it splits nothing. A split beside other kinds of layers (mamba)
    is refused at the first step (``SieveStack._bind``)."""
    from vllm.v1.core import kv_cache_utils

    native = kv_cache_utils._get_kv_cache_groups_uniform_page_size
    if getattr(native, "_sieve_grouping", False):
        return

    def _get_kv_cache_groups_uniform_page_size(kv_cache_spec):
        groups = native(kv_cache_spec)
        sieve_group = {name: m.group(1) for name in kv_cache_spec if (m := _CACHE_LAYER.search(name))}
        split = {}
        for i, group in enumerate(groups):
            for name in group.layer_names:
                if name in sieve_group:
                    split.setdefault(sieve_group[name], set()).add(i)
        if all(len(ids) == 1 for ids in split.values()) or len(sieve_group) != len(kv_cache_spec):
            return groups
        by_group: dict[str, list[str]] = {}
        for name, group in sieve_group.items():
            by_group.setdefault(group, []).append(name)
        return kv_cache_utils.create_kv_cache_group_specs(kv_cache_spec, list(by_group.values()))

    _get_kv_cache_groups_uniform_page_size._sieve_grouping = True
    kv_cache_utils._get_kv_cache_groups_uniform_page_size = _get_kv_cache_groups_uniform_page_size


def require_bfloat16(vllm_config: VllmConfig, model_type: str, why: str) -> None:
    """Refuses another dtype for a model whose vLLM parts around attention run only in bf16 (`why`)."""
    dtype = vllm_config.model_config.dtype
    if dtype != torch.bfloat16:
        raise NotImplementedError(f"sieve-vllm: {model_type} runs in bfloat16 only ({why}), not {dtype}: run vLLM "
                                  "with dtype=bfloat16")


class SieveStack:
    """The model's attention layers in sieve, and the step they are in."""

    def __init__(self, vllm_config: VllmConfig):
        model_config = vllm_config.model_config
        model_type = model_config.hf_config.model_type
        # Prefix caching: vLLM shares the blocks of a cached prefix in its block tables and starts the request
        # after it, and sieve reads whatever blocks and positions a step gives. Verified for the DSA models
        # (tests/test_generate.py: hits give the reference's tokens). Not for the others: deepseek_v4 got no
        # hits from vLLM 0.32 on a CPU (nothing shared was run), and qwen4_exp's tokens changed with them
        # (vLLM's own GDN layers beside sieve's); both refuse it rather than run unverified. On a CPU without
        # AMX vLLM would turn it off for the MLA models: sieve_vllm/platform.py keeps it for the verified ones.
        if vllm_config.cache_config.enable_prefix_caching and model_type not in PREFIX_CACHING_VERIFIED:
            raise NotImplementedError(
                f"sieve-vllm: prefix caching is not verified for {model_type} (only for deepseek_v32 and hy_v4); "
                "run vLLM with enable_prefix_caching=False (--no-enable-prefix-caching)")
        parallel = vllm_config.parallel_config
        if parallel.pipeline_parallel_size != 1 or parallel.decode_context_parallel_size != 1:
            raise NotImplementedError(
                "sieve-vllm: pipeline and decode-context parallelism are not supported (pipeline_parallel_size and "
                "decode_context_parallel_size 1)")
        # Tensor parallelism: every rank runs all heads of the attention (replicated, as a layer whose output
        # projection has already been reduced), over its own copy of the caches; vLLM shards the rest.
        # fp32 models run sieve's exact profile (transformers' numerics), the others the deployed one
        # (bf16 activations, the production FP8 cache formats).
        profile = "exact" if model_config.dtype == torch.float32 else "deployed"
        # vLLM gives every page one size (page_bytes): DeepSeek-V4's compressor-state blocks are fitted to the
        # largest other block rather than hold a whole window of fp32 rows each (512 KiB at ratio 128).
        state_blocks = "fit" if model_type == "deepseek_v4" else "window"
        # DSA on MLA keeps one block size for all its caches: vLLM's own (on a CPU without AMX vLLM 0.32 forces
        # 16 for MLA models, platforms/cpu.py check_and_update_config; with AMX it keeps the 64 asked for).
        dsa = model_type in ("deepseek_v32", "hy_v4")
        self.model = sieve.AttentionModel(model_config.model, profile=profile, caches="caller",
                                          state_block_size=state_blocks,
                                          cache_block_size=vllm_config.cache_config.block_size if dsa else 0)
        self.layer_pos = {layer: i for i, layer in enumerate(self.model.layers)}
        self.specs = {s["name"]: s for s in self.model.cache_specs}
        block_tokens = {self.block_tokens(s) for s in self.specs.values()}
        # One block size and no other kind of cache (v32, hy_v4): vLLM keeps one group of uniform type,
        # scheduled in blocks of cache_config.block_size, which must then be sieve's. Otherwise
        # (DeepSeek-V4's or QSA's several block sizes, or mamba caches beside sieve's) the scheduler block
        # is the lcm of the groups' and every page is padded to one (page_bytes).
        self.uniform = len(block_tokens) == 1 and not model_config.is_hybrid
        block_size = vllm_config.cache_config.block_size
        if self.uniform and block_size not in block_tokens:
            sieve_block = block_tokens.pop()
            raise ValueError(
                f"sieve-vllm: sieve's caches of {self.model.model_type} have blocks of {sieve_block} tokens; "
                f"run vLLM with block_size={sieve_block} (--block-size), not {block_size}")
        self._page_bytes = None
        # Filled as the decoder layers are built, in layer order: each group's layers in sieve's slot order.
        self.cache_layers: dict[str, list[SieveCacheLayer]] = {name: [] for name in self.specs}
        self.bound = False  # the caches: bound at the first step (_bind)
        self.n_tokens = 0
        log.info("sieve-vllm: %s, layers %s, profile %s, cache groups %s", self.model.model_type,
                 self.model.layers, profile, {name: s["layers"] for name, s in self.specs.items()})

    def add_cache_layers(self, module: nn.Module, prefix: str, layer: int) -> None:
        """The cache layers of decoder layer `layer`: one per sieve cache group that holds it."""
        for name, spec in self.specs.items():
            if layer not in spec["layers"]:
                continue
            # One name for the submodule and the static-context key (where vLLM binds the cache), without
            # the dot of DeepSeek-V4's "compressed_kv.m4": install_kv_cache_grouping reads the group back.
            attr = f"sieve_{name.replace('.', '_')}"
            cache = SieveCacheLayer(self, f"{prefix}.{attr}", layer, spec)
            module.add_module(attr, cache)
            self.cache_layers[name].append(cache)

    @staticmethod
    def block_tokens(spec: dict) -> int:
        """The tokens of one block of a cache group: vLLM addresses blocks by token
        (block_table[position // block_size]), sieve by entry, of tokens_per_entry tokens each."""
        return spec["block_size"] * spec["tokens_per_entry"]

    def page_bytes(self, vllm_config: VllmConfig) -> int | None:
        """The one page size of every cache layer where pages differ in kind, else None (sieve's blocks).

        vLLM's page-size unification would otherwise multiply the block size of every group whose page
        divides the largest one (kv_cache_utils.py unify_kv_cache_spec_page_size), against sieve's
        geometry: the page is the largest sieve block or the (aligned) mamba page, in sieve's 64-byte
        stride granule. Asked at the first get_kv_cache_spec, after vLLM has aligned the mamba page."""
        if self.uniform:
            return None
        if self._page_bytes is None:
            page = max([s["block_bytes"] for s in self.specs.values()]
                       + [vllm_config.cache_config.mamba_page_size_padded or 0])
            self._page_bytes = -(-page // 64) * 64
            log.info("sieve-vllm: blocks of %s tokens, every page padded to %d bytes",
                     {name: self.block_tokens(s) for name, s in self.specs.items()}, self._page_bytes)
        return self._page_bytes

    def metadata(self):
        """The step's metadata of each cache group, or None in vLLM's profiling and warmup runs."""
        md = get_forward_context().attn_metadata
        if not isinstance(md, dict):
            return None
        if any(layers[0].prefix not in md for layers in self.cache_layers.values()):
            return None
        if not self.bound:
            self._bind(md)
        return {name: md[layers[0].prefix] for name, layers in self.cache_layers.items()}

    def _bind(self, md: dict) -> None:
        """At the first real step: checks that vLLM laid the caches out as sieve takes them, then binds them."""
        for name, layers in self.cache_layers.items():
            if [l.layer for l in layers] != self.specs[name]["layers"]:
                raise RuntimeError(f"sieve-vllm: cache group {name}: vLLM built the cache layers of layers "
                                   f"{[l.layer for l in layers]}, sieve holds {self.specs[name]['layers']}")
            if any(md[l.prefix] is not md[layers[0].prefix] for l in layers):
                raise RuntimeError(
                    f"sieve-vllm: vLLM put the layers of sieve cache group {name} into several KV cache groups, "
                    "each with its own block table; sieve takes one table per group (install_kv_cache_grouping)")
        self.model.bind_caches({name: [l.kv_cache for l in layers] for name, layers in self.cache_layers.items()})
        self.bound = True

    def begin(self, metadata, positions: torch.Tensor) -> None:
        common = next(iter(metadata.values()))
        n_requests = common.num_reqs
        query_start_loc = common.query_start_loc_cpu[: n_requests + 1]
        self.n_tokens = int(query_start_loc[-1])
        tables = {name: m.block_table_tensor[:n_requests].to(torch.int32).contiguous() for name, m in metadata.items()}
        if positions.dim() == 2:  # M-RoPE positions [3, T]: a text token's rows are equal
            positions = positions[0]
        self.model.begin_step(list(range(n_requests)), query_start_loc, positions[: self.n_tokens].cpu(),
                              block_tables=tables)


class SieveAttention(nn.Module):
    """A decoder layer's attention module, in place of vLLM's: hidden states in, attention output out."""

    def __init__(self, *, stack: SieveStack, prefix: str, layer_index: int):
        super().__init__()
        self._stack = [stack]  # a list: not an nn.Module attribute
        if layer_index not in stack.layer_pos:
            raise ValueError(f"sieve-vllm: {prefix}: layer {layer_index} is not one sieve runs ({stack.model.layers})")
        self.layer_pos = stack.layer_pos[layer_index]
        self.last = self.layer_pos == len(stack.model.layers) - 1
        stack.add_cache_layers(self, prefix, layer_index)
        self.key = next(_KEYS)
        _ATTENTION[self.key] = self

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return torch.ops.vllm.sieve_attention(hidden_states, positions, self.key)

    def attend(self, positions: torch.Tensor, hidden_states: torch.Tensor) -> torch.Tensor:
        stack = self._stack[0]
        metadata = stack.metadata()
        if metadata is None:  # profiling / warmup: no step, nothing to attend to
            return torch.zeros_like(hidden_states)
        if self.layer_pos == 0:
            stack.begin(metadata, positions)
        n = stack.n_tokens
        out = torch.zeros_like(hidden_states)  # rows past n: vLLM's padding
        out[:n] = stack.model.forward(self.layer_pos, hidden_states[:n])
        if self.last:
            stack.model.end_step()
        return out


def attention_factory(stack: SieveStack, layer_of_prefix: re.Pattern):
    """What a decoder layer calls in place of vLLM's attention class: a SieveAttention for the layer
    whose number `layer_of_prefix` finds in the module prefix; vLLM's other arguments are not needed."""

    def attention(*args, prefix: str, **kwargs):
        match = layer_of_prefix.search(prefix)
        if match is None:
            raise ValueError(f"sieve-vllm: cannot tell the layer of attention module {prefix}")
        return SieveAttention(stack=stack, prefix=prefix, layer_index=int(match.group(1)))

    return attention

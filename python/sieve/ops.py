"""sieve's ops over torch tensors.

Each function checks its tensors (dtype, shape, device, strides: an ``InvalidArgumentError`` names the
argument), allocates the outputs it is not given (``out=``) and runs the op on the process's backend
(``sieve.set_backend``). The semantics are the op contracts' (include/sieve/ops/<op>.h); tensors are
passed to the engine through DLPack, without copies.
"""

from __future__ import annotations

from typing import Optional

import torch

from ._sieve import InvalidArgumentError
from ._sieve import ops as _ops


def _rows3(t: torch.Tensor) -> torch.Tensor:
    """[n_tokens, dim] → [n_tokens, 1, dim]; 3-D tensors unchanged."""
    return t.unsqueeze(1) if t.dim() == 2 else t


def rope_inv_freq(
    rot_dim: int,
    base: float,
    *,
    yarn_factor: Optional[float] = None,
    original_max_position: float = 0.0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
) -> torch.Tensor:
    """The RoPE frequency table f_0 … f_{rot_dim/2−1} (float32), with YaRN when ``yarn_factor`` is
    given (ops/rope.h "Frequency table")."""
    out = torch.empty(rot_dim // 2, dtype=torch.float32)
    _ops.rope_inv_freq(out, rot_dim, base, yarn_factor, original_max_position, beta_fast, beta_slow, truncate)
    return out


def rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    *,
    pairing: str = "interleaved",
    slice: str = "last",
    inverse: bool = False,
    attention_factor: float = 1.0,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Rotary embedding of the ``2·len(inv_freq)`` dims at the ``slice`` ('first' | 'last') of each head.

    x: [n_tokens, n_heads, head_dim] or [n_tokens, head_dim], float32 | bfloat16.
    positions: [n_tokens] int64 | int32. pairing: 'interleaved' (GPT-J) | 'half_split' (NeoX).
    ``inverse=True`` is the conjugate rotation (DeepSeek-V4's output de-rotation). ``out`` may be ``x``
    (in place); its dtype may differ from x's (float32 | bfloat16).
    """
    if out is None:
        out = torch.empty_like(x)
    _ops.rope(_rows3(x), _rows3(out), positions, inv_freq, pairing, slice, inverse, attention_factor)
    return out


def quant_fp8(
    x: torch.Tensor,
    group_size: int = 128,
    *,
    dequant: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group FP8 e4m3 quantization with power-of-two (UE8M0) scales (ops/quant_fp8.h).

    x: [n_tokens, n_heads, dim] or [n_tokens, dim], float32 | bfloat16, dim a multiple of group_size.
    Returns (q, scales): q float8_e4m3fn of x's shape and scales float32 [..., dim / group_size];
    with ``dequant=True`` returns (dequantized values in x's dtype, scales) instead.
    """
    x3 = _rows3(x)
    scale_shape = (*x3.shape[:-1], x3.shape[-1] // group_size) if group_size > 0 else x3.shape
    scales = torch.empty(scale_shape, dtype=torch.float32)
    if dequant:
        values = torch.empty_like(x3)
        _ops.quant_fp8(x3, None, None, scales, values, group_size)
    else:
        values = torch.empty(x3.shape, dtype=torch.float8_e4m3fn)
        _ops.quant_fp8(x3, values, None, scales, None, group_size)
    if x.dim() == 2:
        return values.squeeze(1), scales.squeeze(1)
    return values, scales


def _int32(t: torch.Tensor, name: str) -> torch.Tensor:
    """int32 as the engine's index arrays are; vLLM's int64 slot lists are converted (a copy), after a
    range check."""
    if t.dtype == torch.int64:
        if t.numel() and (int(t.max()) >= 2**31 or int(t.min()) < -(2**31)):
            raise InvalidArgumentError(f"sieve.ops: {name}: a value does not fit int32")
        return t.to(torch.int32)
    return t


def cache_store(
    x: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    block_size: int,
    *,
    format: str,
    dim: Optional[int] = None,
    rope_dim: int = 0,
    entry_offset: int = 0,
    round_bf16: bool = False,
) -> None:
    """Writes row r of x into entry ``slot_mapping[r]`` of the paged cache (−1 skips the row), in place.

    x: [n_rows, dim] float32 | bfloat16. kv_cache: [num_blocks, ...] (uint8 for the fp8 records), whose
    stride(0) is the block stride and whose blocks hold ``block_size`` entries of ``format``:
    'f32' | 'bf16' (plain rows of ``dim`` values; x may be a sub-row at ``entry_offset``),
    'fp8_model1' (DeepSeek-V4's 584-byte record, vLLM's fp8_ds_mla: ``rope_dim`` = 64),
    'fp8_row_scale' (indexer keys: e4m3 + one fp32 scale), 'fp8_v32' (DSA's 656-byte MLA record).
    ``round_bf16`` quantizes bf16(x) (DeepSeek-V4). See include/sieve/ops/cache_store.h.
    """
    _ops.cache_store(x, kv_cache, _int32(slot_mapping, "slot_mapping"), block_size, format,
                     x.shape[-1] if dim is None else dim, rope_dim, entry_offset, round_bf16)


def sparse_attention(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    slots: torch.Tensor,
    block_size: int,
    *,
    scale: float,
    format: str = "fp8_model1",
    rope_dim: int = 64,
    v_dim: Optional[int] = None,
    extra_kv_cache: Optional[torch.Tensor] = None,
    extra_slots: Optional[torch.Tensor] = None,
    extra_block_size: int = 0,
    sink: Optional[torch.Tensor] = None,
    math: str = "f32",
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Attention of each token over the cache entries its slot rows list, with an optional sink.

    The shape of vLLM's CPU ``flash_mla_with_kvcache_cpu``: q [n_tokens, n_heads, qk_dim] float32 |
    bfloat16; ``slots`` [n_tokens, width] global slots into ``kv_cache`` (−1 = none; int32, or int64
    converted); an optional second list ``extra_slots`` into ``extra_kv_cache`` (DeepSeek-V4: the window
    first, then the compressed entries); ``sink`` [n_heads] float32 natural-log logits (a virtual key with
    a zero value). V is the first ``v_dim`` values of K (default qk_dim: DeepSeek-V4's K = V; DSA's MLA
    passes kv_lora_rank). ``math`` (ops/attention_math.h): 'f32' (the exact profile) | 'bf16' (the
    deployed one: the softmax weights are rounded to bf16 before P·V, their sum is not, as vLLM's kernel
    does). Returns out [n_tokens, n_heads, v_dim] in q's dtype. See include/sieve/ops/sparse_attention.h.
    """
    v_dim = q.shape[-1] if v_dim is None else v_dim
    if out is None:
        out = torch.empty((q.shape[0], q.shape[1], v_dim), dtype=q.dtype)
    _ops.sparse_attention(
        out, q, kv_cache, _int32(slots, "slots"), block_size, extra_kv_cache,
        None if extra_slots is None else _int32(extra_slots, "extra_slots"), extra_block_size, sink, scale,
        format, rope_dim, v_dim, math)
    return out


def _indexer(q, k_cache, block_table, n_keys, block_size, key_format, q_scale, weights, weight_scale,
             token_request, scores, selected):
    if token_request is None:
        if block_table.shape[0] != q.shape[0]:
            raise InvalidArgumentError(
                f"sieve.ops.indexer_scores: block_table has {block_table.shape[0]} rows for {q.shape[0]} tokens; "
                "pass token_request to share rows")
        token_request = torch.arange(q.shape[0], dtype=torch.int32)
    if q.dtype == torch.float8_e4m3fn and q_scale is None:
        q_scale = torch.ones(q.shape[:2], dtype=torch.float32)  # vLLM folds the q scales into the weights
    _ops.indexer_scores(q, k_cache, _int32(block_table, "block_table"), _int32(token_request, "token_request"),
                        _int32(n_keys, "n_keys"), block_size, key_format, q_scale, weights, weight_scale, scores,
                        selected)


def indexer_scores(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_keys: torch.Tensor,
    block_size: int,
    *,
    n_cols: Optional[int] = None,
    key_format: str = "fp8_row_scale",
    weights: Optional[torch.Tensor] = None,
    weight_scale: float = 1.0,
    q_scale: Optional[torch.Tensor] = None,
    token_request: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The Lightning Indexer's scores: score[t, j] = s_j · Σ_h w[t, h] · ReLU(⟨q[t, h], k_j⟩) for the
    keys j < n_keys[t] of token t's block-table row (the shape of vLLM's ``fp8_paged_mqa_logits_cpu``).

    q: [n_tokens, n_heads, head_dim] float32 | bfloat16 | float8_e4m3fn (then ``q_scale`` [n_tokens,
    n_heads], default 1: vLLM folds it into the weights). k_cache: [num_blocks, ...] of ``key_format``
    entries ('fp8_row_scale' | 'bf16' | 'f32'). block_table: [n_requests, max_blocks] int32; token t reads
    row ``token_request[t]`` (default: row t). weights: [n_tokens, n_heads] float32 or None (every head
    1), times ``weight_scale``. Returns scores [n_tokens, n_cols] float32 (default n_cols = max n_keys);
    columns ≥ n_keys[t] are not written. See include/sieve/ops/indexer_scores.h.
    """
    if n_cols is None:
        n_cols = int(n_keys.max()) if n_keys.numel() else 0
    scores = torch.empty((q.shape[0], n_cols), dtype=torch.float32)
    _indexer(q, k_cache, block_table, n_keys, block_size, key_format, q_scale, weights, weight_scale,
             token_request, scores, None)
    return scores


def indexer_topk(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    block_table: torch.Tensor,
    n_keys: torch.Tensor,
    block_size: int,
    k: int,
    *,
    key_format: str = "fp8_row_scale",
    weights: Optional[torch.Tensor] = None,
    weight_scale: float = 1.0,
    q_scale: Optional[torch.Tensor] = None,
    token_request: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """The top-k of :func:`indexer_scores` in the same pass, without writing the scores: [n_tokens, k]
    int32 request-local key indices, ascending, −1 past the candidates (vLLM's ``out_raw_indices`` of
    ``topk_transform_512_cpu``, for any k). Ties go to the lower index."""
    selected = torch.empty((q.shape[0], k), dtype=torch.int32)
    _indexer(q, k_cache, block_table, n_keys, block_size, key_format, q_scale, weights, weight_scale,
             token_request, None, selected)
    return selected


class Linear:
    """y = x·Wᵀ (+ b) with the weights prepared once (packed, converted) by the backend current when it is
    made, on which it keeps running (include/sieve/ops/linear.h).

    weight: [out_features, in_features] float32 | bfloat16 | float8_e4m3fn (then ``block_scale``
    [ceil(out/128), ceil(in/128)] float32 multipliers, one per 128×128 block). bias: [out_features] or None.
    math: 'f32' (the exact profile: fp32 products of the weights as given) | 'bf16' (the deployed profile,
    vLLM CPU's W8A16: x and W rounded to bf16, fp32 accumulation). The weights are copied: the tensors may
    be freed afterwards.
    """

    def __init__(self, weight: torch.Tensor, *, block_scale: Optional[torch.Tensor] = None,
                 bias: Optional[torch.Tensor] = None, math: str = "f32"):
        self._linear = _ops.Linear(weight, block_scale, bias, math)

    @property
    def in_features(self) -> int:
        return self._linear.in_features

    @property
    def out_features(self) -> int:
        return self._linear.out_features

    def __call__(self, x: torch.Tensor, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x: [n_tokens, in_features] float32 | bfloat16 → [n_tokens, out_features], in x's dtype unless
        ``out`` (float32 | bfloat16, rows contiguous, may be a column slice of a wider tensor) is given."""
        if out is None:
            out = torch.empty((x.shape[0], self.out_features), dtype=x.dtype)
        self._linear.run(x, out)
        return out

    def __repr__(self) -> str:
        return (f"sieve.ops.Linear({self.out_features}×{self.in_features} on {self._linear.backend}: "
                f"{self._linear.describe()})")


class GroupedLinear:
    """G independent linears over G slices of the input: z[t, g] = x[t, g]·W_gᵀ, with W_g the row block
    ``weight[g·R:(g+1)·R]`` (DeepSeek-V4's wo_a: ``einsum("tgk,grk->tgr", x, weight.view(G, R, K))``;
    include/sieve/ops/linear.h "Groups", one call for every group; vLLM CPU's ``bmm_cpu`` over its packed
    ``wo_a``).

    weight: [G·R, K] as for :class:`Linear`; FP8 weights need R a multiple of 128 (each group whole scale
    blocks; the release checkpoints have R = o_lora_rank = 1024): otherwise pass them dequantized.
    """

    def __init__(self, weight: torch.Tensor, groups: int, *, block_scale: Optional[torch.Tensor] = None,
                 math: str = "f32"):
        if groups < 1 or weight.dim() != 2 or weight.shape[0] % groups:
            raise InvalidArgumentError(
                f"sieve.ops.GroupedLinear: weight {list(weight.shape)} does not split into {groups} row blocks")
        rows = weight.shape[0] // groups
        if block_scale is not None and rows % 128:
            raise InvalidArgumentError(
                f"sieve.ops.GroupedLinear: FP8 groups of {rows} rows split 128-row scale blocks; dequantize the "
                "weight first")
        self.groups, self.rows = groups, rows
        self._linear = _ops.Linear(weight, block_scale, None, math, groups)

    def __call__(self, x: torch.Tensor, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x: [n_tokens, G, K] (or [n_tokens, G·K]) float32 | bfloat16 → [n_tokens, G·R], in x's dtype unless
        ``out`` is given."""
        x3 = x.view(x.shape[0], self.groups, -1) if x.dim() == 2 else x
        if x3.dim() != 3 or x3.shape[1] != self.groups:
            raise InvalidArgumentError(
                f"sieve.ops.GroupedLinear: x {list(x.shape)}, expected [n_tokens, {self.groups}, in_features]")
        if out is None:
            out = torch.empty((x3.shape[0], self.groups * self.rows), dtype=x3.dtype)
        self._linear.run(x3.reshape(x3.shape[0], -1), out)  # each row: the G groups' values one after another
        return out


def output_projection(
    o: torch.Tensor,
    positions: torch.Tensor,
    inv_freq: torch.Tensor,
    wo_a: GroupedLinear,
    wo_b: Optional[Linear] = None,
    *,
    attention_factor: float = 1.0,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """DeepSeek-V4's inverse RoPE + grouped low-rank output projection (specs deepseek_v4.md §3.9; vLLM
    CPU's ``inverse_gptj_rope_o_proj_cpu`` then ``bmm_cpu`` and ``wo_b``): the last ``2·len(inv_freq)``
    dims of each head of o are rotated back by −position (interleaved pairs), the heads are grouped
    ``o.view(T, G, (H/G)·d)``, z = wo_a(o) and, with ``wo_b``, the result is wo_b(z).

    o: [n_tokens, n_heads, head_dim] float32 | bfloat16 (attention's output). Returns z [n_tokens, G·R] in
    o's dtype, or wo_b(z) [n_tokens, hidden] in ``out_dtype`` (default float32, as the engine's layer).
    """
    derotated = rope(o, positions, inv_freq, pairing="interleaved", slice="last", inverse=True,
                     attention_factor=attention_factor)
    z = wo_a(derotated.view(o.shape[0], wo_a.groups, -1))
    if wo_b is None:
        return z
    return wo_b(z, out=torch.empty((o.shape[0], wo_b.out_features), dtype=out_dtype or torch.float32))

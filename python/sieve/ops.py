"""sieve's ops over torch tensors.

Each function checks its tensors (dtype, shape, device, strides: an ``InvalidArgumentError`` names the
argument), allocates the outputs it is not given (``out=``) and runs the op on the process's backend
(``sieve.set_backend``). The semantics are the op contracts' (include/sieve/ops/<op>.h); tensors are
passed to the engine through DLPack, without copies.
"""

from __future__ import annotations

from typing import Optional

import torch

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

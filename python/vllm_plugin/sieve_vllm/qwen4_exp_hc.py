"""Torch replacements for the Triton-only hyper-connection glue ops of vLLM 0.32's qwen4_exp
(``vllm/models/qwen4_exp/nvidia/ops/hc.py``), for vLLM's CPU build (no Triton).

Each function follows its Triton kernel's semantics (read from ops/hc.py):

* loads are upcast to fp32 (``.to(tl.float32)``), all arithmetic is fp32;
* the result is rounded once, to the output tensor's dtype, at the store (outputs are
  ``x.new_empty`` / ``residual.new_empty``: the *input* dtype, not the weight dtype);
* ``hc_combine_norm`` rounds the combine to ``residual.dtype`` *before* the norm (ops/hc.py:325-332);
* the places where the kernel is written to lower to an FMA (``y += y * w``, ``acc += s * x``,
  ``res + block * inj``) are computed as a single-rounding fused multiply-add (emulated exactly
  enough in float64: the product of two fp32 is exact in fp64, then one add and one rounding;
  ``FMA=False`` falls back to two fp32 roundings).

Not reproducible bit-for-bit from torch: the kernels' reduction order (``tl.sum`` tree) and the GPU's
``rsqrt.approx`` / fast ``exp`` in ``tl.sigmoid``; these are ulp-level fp32 effects.

``patch()`` installs them as the module globals that ``vllm.models.qwen4_exp.nvidia.hyperconnection``
calls (it imported them by name at hyperconnection.py:41-47), and also in the ``ops.hc`` module.
"""

from __future__ import annotations

import torch

FMA = True


def _fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fp32 a*b + c with one rounding (Triton/LLVM contract mul+add into fma.rn.f32)."""
    if not FMA:
        return a * b + c
    return (a.double() * b.double() + c.double()).float()


def grouped_gemma_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float, num_groups: int) -> torch.Tensor:
    """ops/hc.py:12-78. Per-group RMSNorm over DIM // num_groups with Gemma's (1 + w) affine;
    weight is [group_dim] (shared) or [DIM] (per element). Output in x.dtype."""
    n, dim = x.shape
    assert dim % num_groups == 0
    g = dim // num_groups
    assert weight.numel() in (g, dim)
    xf = x.float().reshape(n, num_groups, g)
    rrms = torch.rsqrt((xf * xf).sum(-1, keepdim=True) / g + eps)
    y = xf * rrms
    w = weight.float().view(1, 1, g) if weight.numel() == g else weight.float().view(1, num_groups, g)
    y = _fma(y, w, y)  # y += y * w
    return y.view(n, dim).to(x.dtype)


def hc_silu(x: torch.Tensor, hc_count: int) -> torch.Tensor:
    """ops/hc.py:81-122. silu(x / HC) in fp32, output in x.dtype."""
    xf = x.float() / hc_count
    return (xf * torch.sigmoid(xf)).to(x.dtype)


def hc_gate_mix(x: torch.Tensor, gate: torch.Tensor, hc_count: int) -> torch.Tensor:
    """ops/hc.py:125-185. mean over the HC streams of sigmoid(gate) * x: [N, HC*D] -> [N, D],
    streams accumulated in order into an fp32 accumulator, divided by HC, output in x.dtype."""
    n, dim = gate.shape
    assert x.shape == gate.shape and dim % hc_count == 0
    d = dim // hc_count
    xf = x.float().reshape(n, hc_count, d)
    gf = torch.sigmoid(gate.float().reshape(n, hc_count, d))
    acc = torch.zeros(n, d, dtype=torch.float32)
    for s in range(hc_count):  # tl.static_range(HC): acc += sigmoid(g) * x
        acc = _fma(gf[:, s], xf[:, s], acc)
    acc = acc / hc_count
    return acc.to(x.dtype)


def _combine_f32(residual, block_output, injection_logits, hc_count):
    n, dim = residual.shape
    assert dim % hc_count == 0
    d = dim // hc_count
    assert block_output.shape == (n, d)
    res = residual.float().reshape(n, hc_count, d)
    blk = block_output.float().reshape(n, 1, d)
    if injection_logits is None:
        return res + blk  # out = res + block (unit weight)
    assert injection_logits.shape == (n, hc_count)
    inj = 2.0 * torch.sigmoid(injection_logits.float() / hc_count)  # [N, HC]
    return _fma(blk, inj.reshape(n, hc_count, 1), res)  # res + block * inj


def hc_combine(residual: torch.Tensor, block_output: torch.Tensor, injection_logits: torch.Tensor | None,
               hc_count: int) -> torch.Tensor:
    """ops/hc.py:188-269. residual[N, HC*D] + block[N, D] * 2*sigmoid(inj[N, HC] / HC) per stream
    (unit weight without inj), fp32, output in residual.dtype."""
    n, dim = residual.shape
    return _combine_f32(residual, block_output, injection_logits, hc_count).view(n, dim).to(residual.dtype)


def hc_combine_norm(residual: torch.Tensor, block_output: torch.Tensor, injection_logits: torch.Tensor | None,
                    norm_weight: torch.Tensor, eps: float, hc_count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """ops/hc.py:272-392. The combine, rounded to residual.dtype (returned), then the grouped Gemma RMSNorm
    of each stream of the *rounded* combine (returned in residual.dtype)."""
    n, dim = residual.shape
    d = dim // hc_count
    assert norm_weight.numel() in (d, dim)
    out = _combine_f32(residual, block_output, injection_logits, hc_count).view(n, dim).to(residual.dtype)
    of = out.float().view(n, hc_count, d)
    rrms = torch.rsqrt((of * of).sum(-1, keepdim=True) / d + eps)
    y = of * rrms
    w = norm_weight.float().view(1, 1, d) if norm_weight.numel() == d else norm_weight.float().view(1, hc_count, d)
    y = _fma(y, w, y)
    return out, y.view(n, dim).to(residual.dtype)


OPS = {
    "grouped_gemma_rmsnorm": grouped_gemma_rmsnorm,
    "hc_silu": hc_silu,
    "hc_gate_mix": hc_gate_mix,
    "hc_combine": hc_combine,
    "hc_combine_norm": hc_combine_norm,
}


def patch() -> None:
    """Install the torch ops where vLLM's qwen4_exp looks them up (call in every process that builds the
    model: the general plugin's register() does, as vLLM runs it in each worker)."""
    from vllm.models.qwen4_exp.nvidia import hyperconnection
    from vllm.models.qwen4_exp.nvidia.ops import hc as hc_ops

    for name, fn in OPS.items():
        setattr(hyperconnection, name, fn)  # the names GatedResidual calls (hyperconnection.py:142-211)
        setattr(hc_ops, name, fn)  # the public wrappers, for any other importer

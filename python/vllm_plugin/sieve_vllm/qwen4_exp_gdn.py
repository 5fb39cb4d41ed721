"""A torch fallback for vLLM's CPU GDN prefill kernel ``torch.ops._C.chunk_gated_delta_rule_cpu``, which
refuses small head sizes ("expect head_dim to be multiples of 32", and "Unexpected head dim size, 32":
the tiny qwen4_exp checkpoint has linear_key_head_dim = linear_value_head_dim = 8).

The fallback is the exact (token-by-token) gated delta rule of transformers'
``torch_recurrent_gated_delta_rule`` (modeling_qwen4_exp.py:392-454): fp32 math, l2-normalised q and k
(eps 1e-6), q scaled by K^-0.5, state S[K, V] per value head decayed by exp(g), delta-rule update, out = S^T q.
The recurrent state layout is vLLM's: ``initial_state`` is the ssm cache viewed [slots, Hv, K, V]
(gdn_attention.py:232-233), read and written in place at ``initial_state_indices``, which is also the layout
the C++ decode kernel ``fused_sigmoid_gating_delta_rule_update_cpu`` uses (checked by probe). Key heads are
shared by Hv // Hk consecutive value heads (repeat_interleave, as transformers).

``patch()`` replaces ``vllm._custom_ops.chunk_gated_delta_rule_cpu`` (looked up at call time by
layers/mamba/ops/cpu/gdn_attention.py:339, 711, 786); shapes the C++ kernel accepts still go to it.
"""

from __future__ import annotations

import torch

_NATIVE = {}  # (K, V, dtype) -> does the C++ kernel accept it
_ORIG = None


def _native_ok(orig, q, v) -> bool:
    key = (q.shape[-1], v.shape[-1], q.dtype)
    if key not in _NATIVE:
        hk, hv, kd, vd = q.shape[-2], v.shape[-2], q.shape[-1], v.shape[-1]
        try:
            orig(query=torch.zeros(1, 1, hk, kd, dtype=q.dtype), key=torch.zeros(1, 1, hk, kd, dtype=q.dtype),
                 value=torch.zeros(1, 1, hv, vd, dtype=v.dtype), g=torch.zeros(1, 1, hv),
                 beta=torch.zeros(1, 1, hv, dtype=v.dtype), initial_state=torch.zeros(1, hv, kd, vd),
                 output_final_state=True, cu_seqlens=torch.tensor([0, 1], dtype=torch.int32), head_first=False,
                 use_qk_l2norm_in_kernel=True, initial_state_indices=torch.tensor([0], dtype=torch.int32))
            _NATIVE[key] = True
        except RuntimeError:
            _NATIVE[key] = False
    return _NATIVE[key]


def chunk_gated_delta_rule_torch(query, key, value, g, beta, initial_state, output_final_state, cu_seqlens,
                                 head_first, use_qk_l2norm_in_kernel, initial_state_indices, eps=1e-5):
    assert not head_first
    _, T, hk, kd = query.shape
    hv, vd = value.shape[-2:]
    rep = hv // hk
    q = query[0].float()
    k = key[0].float()
    if use_qk_l2norm_in_kernel:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q / kd ** 0.5
    q = q.repeat_interleave(rep, dim=1)  # [T, Hv, K]
    k = k.repeat_interleave(rep, dim=1)
    v = value[0].float()
    gg = g.reshape(T, hv).float()
    bb = beta.reshape(T, hv).float()
    out = torch.empty(T, hv, vd, dtype=torch.float32)
    cu = cu_seqlens.tolist()
    idx = initial_state_indices.tolist()
    for s in range(len(cu) - 1):
        S = initial_state[idx[s]].float().clone()  # [Hv, K, V]
        for t in range(cu[s], cu[s + 1]):
            S = S * gg[t].exp()[:, None, None]
            kv_mem = (S * k[t][:, :, None]).sum(-2)
            delta = (v[t] - kv_mem) * bb[t][:, None]
            S = S + k[t][:, :, None] * delta[:, None, :]
            out[t] = (S * q[t][:, :, None]).sum(-2)
        if output_final_state:
            initial_state[idx[s]] = S.to(initial_state.dtype)
    return out.to(value.dtype).unsqueeze(0), initial_state


def chunk_gated_delta_rule_cpu(query, key, value, g, beta, initial_state, output_final_state, cu_seqlens,
                               head_first, use_qk_l2norm_in_kernel, initial_state_indices, eps=1e-5):
    args = dict(query=query, key=key, value=value, g=g, beta=beta, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens, head_first=head_first,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, initial_state_indices=initial_state_indices,
                eps=eps)
    if _native_ok(_ORIG, query, value):
        return _ORIG(**args)
    return chunk_gated_delta_rule_torch(**args)


def patch() -> None:
    global _ORIG
    import vllm._custom_ops as ops

    if _ORIG is None:
        _ORIG = ops.chunk_gated_delta_rule_cpu
        ops.chunk_gated_delta_rule_cpu = chunk_gated_delta_rule_cpu

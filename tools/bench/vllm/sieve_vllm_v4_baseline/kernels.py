"""torch versions of the Triton metadata kernels that vLLM 0.32's deepseek_v4 metadata builders launch.

vLLM's CPU wheel has no Triton CPU backend: ``vllm/triton_utils/importing.py:36-48`` then disables
Triton and ``triton.jit`` becomes a no-op decorator, so ``kernel[grid](...)`` fails with "'function'
object is not subscriptable" (first at ``v1/attention/ops/metadata.py:43``). The CPU platform's own
replacements (``platforms/cpu.py:670-721``) do not cover deepseek_v4's builders. The five kernels they
reach on a CPU run (decode steps of one token, no speculative decoding, no context parallelism, no
images) are replaced here through vLLM's dispatcher (``triton_utils/dispatcher.py:147 register_kernels``):

* ``v1/attention/ops/metadata.py:24 _token_request_mapping_kernel``, launched at ``metadata.py:43``
  (``CommonAttentionMetadata.token_to_req_indices``, ``v1/attention/backend.py:493``; every V4 builder):
  each token's request index. Read by the CPU attention (``cpu_sparse.py:582``) and the compressors.
* ``v1/attention/backends/mla/sparse_swa.py:1042 _compute_swa_indices_and_lens_kernel``
  (``ComputeSWAIndicesAndLensKernel.kernel``), launched at ``sparse_swa.py:658, 705`` (SWA builder): each
  token's sliding-window slots and window length. The CPU attention recomputes its window from the
  positions (``cpu_sparse.py:592-601``) and does not read them; they are built right all the same.
* ``sparse_swa.py:341 ComputePrefillMetadataKernel.kernel``, launched at ``sparse_swa.py:963``: each
  prefill's gather length (its query plus the visible window before it); not read on the CPU either.
* ``v1/attention/backends/mla/compressor_utils.py:45 CompressedSlotMappingKernel.kernel``, launched at
  ``compressor_utils.py:217`` (compressor, sparse-MLA and indexer builders): the compressed-cache slot
  each compressing token writes (``compress_norm_rope_store_cpu``'s ``kv_slot_mapping``).
* ``v1/attention/backends/mla/indexer.py:499 BuildPrefillChunkMetadataKernel.kernel``, launched at
  ``indexer.py:1926`` (indexer builder, prefill): each prefill token's compressed key range
  (``cu_seqlen_ks/ke``, read by ``sparse_attn_indexer.py`` ``forward_cpu`` past the short-context
  fallback, i.e. beyond 4 x 512 tokens) and each compressed key's request (``token_to_seq``).

They are written from what the kernels compute (one Triton program per token or request; here whole
tensors at once). A kernel not listed here that a run reaches still fails as above, loudly.

The dispatcher's ``KernelOverride`` (``dispatcher.py:39-81``) drops the launch grid (``__getitem__``,
63-64), but three of these kernels take their token or request count only from the grid (one program
per token / request: ``sparse_swa.py:1216``, ``compressor_utils.py:177``, ``indexer.py:705``).
``GridKernelOverride`` forwards it: each torch version is called as ``impl(grid, args)`` with ``args``
the launch's arguments by the kernel's parameter names.
"""

from __future__ import annotations

import functools
from unittest import mock

import torch

_installed = False


class _GridKernelOverrideBase:
    """Mixin for vLLM's KernelOverride: ``kernel[grid](*args, **kwargs)`` calls ``impl(grid, args)`` with all
    launch arguments by name (positional ones bound to the kernel's parameter order)."""

    def __getitem__(self, grid):
        return functools.partial(self._launch_grid, tuple(grid))

    def _launch_grid(self, grid, *args, **kwargs):
        if len(args) > len(self.arg_names):
            raise TypeError(f"{self.__name__}: {len(args)} positional arguments for {len(self.arg_names)} parameters")
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return self._impl(grid, named)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.__name__}: a Triton kernel stand-in is launched as kernel[grid](...)")


def _grid_override_class():
    from vllm.triton_utils.dispatcher import KernelOverride

    return type("GridKernelOverride", (_GridKernelOverrideBase, KernelOverride), {})


def _i(value) -> int:
    return int(value)


def token_request_mapping(grid, a):
    """Token t < num_tokens gets the request r with query_start_loc[r] <= t < query_start_loc[r+1] (requests
    with empty queries skipped, clamped to the last request), or 0 when t >= num_mapped."""
    qsl, out = a["query_start_loc"], a["output"]
    num_reqs, num_mapped, num_tokens = _i(a["num_reqs"]), _i(a["num_mapped"]), _i(a["num_tokens"])
    if num_tokens <= 0:
        return
    if num_reqs <= 0:
        out[:num_tokens] = 0
        return
    ends = qsl[1:num_reqs + 1].contiguous()
    tokens = torch.arange(num_tokens, dtype=ends.dtype, device=ends.device)
    req = torch.searchsorted(ends, tokens, right=True).clamp_(max=num_reqs - 1)
    req = torch.where(tokens < num_mapped, req, torch.zeros_like(req))
    out[:num_tokens] = req.to(out.dtype)


def swa_indices_and_lens(grid, a):
    """Row i (token token_offset + i, one per grid program) holds the global SWA slots of the token's window
    [max(pos - window + 1 - image widening, replay start, 0), pos + right], then -1; its length goes to
    swa_lens[i]. Rows of invalid (padding) tokens are all -1 with length 0."""
    n = _i(grid[0])
    if n <= 0:
        return
    offset, window, width = _i(a["token_offset"]), _i(a["window_size"]), _i(a["index_width"])
    block_size, row_stride = _i(a["block_size"]), _i(a["swa_indices_stride"])
    out, lens = a["swa_indices_ptr"], a["swa_lens_ptr"]
    qsl, seq_lens, t2r = a["query_start_loc_ptr"], a["seq_lens_ptr"], a["token_to_req_indices_ptr"]
    block_table, replay_start = a["block_table_ptr"], a["replay_start_ptr"]
    device = out.device
    tok = torch.arange(offset, offset + n, device=device)
    valid = a["is_valid_token_ptr"][tok].bool()
    req = torch.where(valid, t2r[tok].long(), torch.zeros_like(tok))
    q_start = qsl[req].long()
    q_len = qsl[req + 1].long() - q_start
    pos = seq_lens[req].long() - q_len + tok - q_start
    if a.get("HAS_IMAGE"):
        left = a["left_visible_ptr"][tok].long()
        right = a["right_visible_ptr"][tok].long()
    else:
        left = right = torch.zeros_like(pos)
    widen = (left - (window - 1)).clamp(min=0)
    start = torch.maximum((pos - (window - 1) - widen).clamp(min=0), replay_start[req].long())
    length = torch.where(valid, pos + right + 1 - start, torch.zeros_like(pos))
    lens[:n] = length.to(lens.dtype)
    cols = torch.arange(width, device=device)
    inside = cols.unsqueeze(0) < length.unsqueeze(1)
    p = start.unsqueeze(1) + cols.unsqueeze(0)
    block_index = torch.where(inside, p // block_size, torch.zeros_like(p)).clamp(max=block_table.shape[1] - 1)
    blocks = block_table[req.unsqueeze(1), block_index].long()
    slots = torch.where(inside, blocks * block_size + p % block_size, torch.full_like(p, -1))
    out.as_strided((n, width), (row_stride, 1)).copy_(slots.to(out.dtype))


def prefill_gather_lens(grid, a):
    """For prefill i (request num_decodes + i): its query length plus the part of its context before the query
    that the window sees: min(max(prefix - replay start, 0), window - 1)."""
    n, d, window = _i(a["num_prefills"]), _i(a["num_decodes"]), _i(a["window_size"])
    if n <= 0:
        return
    out, seq_lens, qsl = a["prefill_gather_lens_ptr"], a["seq_lens_ptr"], a["query_start_loc_ptr"]
    r = torch.arange(d, d + n, device=out.device)
    q_len = qsl[r + 1].long() - qsl[r].long()
    prefix = seq_lens[r].long() - q_len
    visible = (prefix - a["replay_start_ptr"][r].long()).clamp(min=0)
    out[:n] = (q_len + visible.clamp(max=window - 1)).to(out.dtype)


def _tokens_of_requests(qsl: torch.Tensor, num_reqs: int):
    """(request of each query token, its index within its request's query, its index in the batch)."""
    starts = qsl[:num_reqs].long()
    q_len = qsl[1:num_reqs + 1].long() - starts
    req = torch.repeat_interleave(torch.arange(num_reqs, device=qsl.device), q_len)
    first = torch.cumsum(q_len, 0) - q_len  # each request's first token, counted from starts[0]
    k = torch.arange(req.numel(), device=qsl.device) - first[req]
    return req, k, starts[req] + k, q_len


def compressed_slot_mapping(grid, a):
    """A token at position pos writes compressed entry pos // ratio when (pos + 1) % ratio == 0 and its own
    slot is not PAD (SWA bounded replay), at block_table[req][entry // block_size] * block_size + entry %
    block_size (entry counted in this rank's positions under decode context parallelism); others get PAD."""
    qsl, block_table = a["query_start_loc_ptr"], a["block_table_ptr"]
    num_reqs = min(_i(grid[0]), qsl.numel() - 1)
    if num_reqs <= 0:
        return
    out, slot_mapping, seq_lens = a["compressed_slot_mapping_ptr"], a["slot_mapping_ptr"], a["seq_lens_ptr"]
    ratio, pad, block_size = _i(a["COMPRESS_RATIO"]), _i(a["PAD_ID"]), _i(a["block_size"])
    world, interleave = _i(a["dcp_world_size"]), _i(a["cp_interleave"])
    req, k, tok, q_len = _tokens_of_requests(qsl, num_reqs)
    if tok.numel() == 0:
        return
    pos = seq_lens[:num_reqs].long()[req] - q_len[req] + k
    valid = ((pos + 1) % ratio == 0) & (slot_mapping[tok].long() != pad)
    local = pos // (interleave * world) * interleave + pos % interleave
    entry = local // ratio
    block_index = torch.where(valid, entry // block_size, torch.zeros_like(entry)).clamp(max=block_table.shape[1] - 1)
    slots = block_table[req, block_index].long() * block_size + entry % block_size
    out[tok] = torch.where(valid, slots, torch.full_like(slots, pad)).to(out.dtype)


def prefill_chunk_metadata(grid, a):
    """For each prefill token inside [query_slice_start, query_slice_stop) (batch positions of this chunk):
    ks = its request's row start, ke = row start + (its causal length // ratio) (localised to this rank under
    decode context parallelism); token_to_seq[j] = the request of compressed key j."""
    num_reqs = _i(grid[0])
    if num_reqs <= 0:
        return
    qsl = a["query_start_loc_ptr"]
    ratio = _i(a["COMPRESS_RATIO"])
    s0, s1 = _i(a["query_slice_start"]), _i(a["query_slice_stop"])
    rank, world, interleave = _i(a["DCP_RANK"]), _i(a["DCP_WORLD"]), _i(a["DCP_INTERLEAVE"])
    ks, ke = a["cu_compressed_seq_len_ks_ptr"], a["cu_compressed_seq_len_ke_ptr"]
    row_start = a["row_start_cu_compressed_seq_lens_ptr"][:num_reqs].long()
    req, k, tok, q_len = _tokens_of_requests(qsl, num_reqs)
    inside = (tok >= s0) & (tok < s1)
    req, k, tok = req[inside], k[inside], tok[inside]
    context = a["uncompressed_seq_lens_ptr"][:num_reqs].long()[req] - q_len[req] + 1 + k
    length = context // ratio
    if world > 1:
        base = length // interleave // world * interleave
        rest = (length - base * world - rank * interleave).clamp(min=0).clamp(max=interleave)
        length = base + rest
    ks[tok - s0] = row_start[req].to(ks.dtype)
    ke[tok - s0] = (row_start[req] + length).to(ke.dtype)
    cu = a["cu_compressed_seq_lens_ptr"][:num_reqs + 1].long()
    counts = cu[1:] - cu[:-1]
    owners = torch.repeat_interleave(torch.arange(num_reqs, device=cu.device), counts)
    token_to_seq = a["token_to_seq_ptr"]
    first = _i(cu[0])
    token_to_seq[first:first + owners.numel()] = owners.to(token_to_seq.dtype)


OVERRIDES = {
    "vllm.v1.attention.ops.metadata._token_request_mapping_kernel": token_request_mapping,
    "vllm.v1.attention.backends.mla.sparse_swa.ComputeSWAIndicesAndLensKernel.kernel": swa_indices_and_lens,
    "vllm.v1.attention.backends.mla.sparse_swa.ComputePrefillMetadataKernel.kernel": prefill_gather_lens,
    "vllm.v1.attention.backends.mla.compressor_utils.CompressedSlotMappingKernel.kernel": compressed_slot_mapping,
    "vllm.v1.attention.backends.mla.indexer.BuildPrefillChunkMetadataKernel.kernel": prefill_chunk_metadata,
}


def install_metadata_kernels() -> None:
    """Registers ``OVERRIDES`` with vLLM's dispatcher, as grid-forwarding overrides (once per process).

    ``register_kernels`` builds its wrappers from the module-level name ``KernelOverride`` (dispatcher.py:167),
    which is pointed at the grid-forwarding subclass for that call."""
    global _installed
    if _installed:
        return
    from vllm.triton_utils import HAS_TRITON, dispatcher

    if HAS_TRITON:  # a Triton with a CPU backend runs the kernels themselves
        _installed = True
        return
    with mock.patch.object(dispatcher, "KernelOverride", _grid_override_class()):
        dispatcher.register_kernels(OVERRIDES)
    _installed = True

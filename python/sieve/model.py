"""A checkpoint's attention layers, stepped one layer at a time by an engine that runs the rest of the
network (embeddings, MLP/MoE, sampling) and its own scheduler around them."""

from __future__ import annotations

import os
from typing import Hashable, Iterable, Optional, Sequence

import torch

from . import _sieve


_STATE_BLOCKS = {"window": 0, "fit": -1}  # ModelOptions::state_block_size (0, kFitStateBlocks)


class AttentionModel:
    """The attention layers of a Hugging Face checkpoint (``config.json`` + safetensors) over paged
    caches that sieve owns.

    One step, with the metadata an engine has (vLLM's names)::

        model.begin_step(request_ids, query_start_loc, positions)
        for layer_pos in range(len(model.layers)):
            ...                                       # the caller's network up to attention
            h = model.forward(layer_pos, hidden_states)
            ...
        model.end_step()

    ``request_ids``: one hashable id per request of the step (vLLM's ``req_id`` strings work);
    ``query_start_loc`` [n_requests + 1]: where each request's tokens start in the step's rows;
    ``positions`` [n_tokens]: each token's absolute position. A request's tokens are consecutive
    positions continuing where its previous step stopped (0 for a new request), or where
    ``rollback(request_id, tokens)`` put it after a verification step (speculative decoding: the request's
    token and its draft tokens, of which the target kept a prefix), or where ``attach_prefix`` started it
    (prefix caching). ``free(request_id)`` when a request ends. ``forward`` takes and returns
    [n_tokens, hidden_size] rows (float32 inside; other float dtypes are converted and returned in the
    input's dtype).

    profile: 'exact' (fp32, f32 caches: transformers to ~3e-7) or 'deployed' (bf16 activations, the
    production FP8 cache formats). backend: a spec of ``sieve.backend_specs()``. cache_tokens: the cache
    pools hold this many resident tokens per cache group.

    state_block_size (DeepSeek-V4 only): the rows of a compressor-state cache block: 'window' (a whole
    window, coff·m rows, per block), 'fit' (as many rows as the largest block of the other cache groups has
    bytes: for an engine that gives every group one page size, as vLLM does, which would otherwise pad every
    page to a window of fp32 state rows, 512 KiB at m = 128 and head_dim 512), or a number of rows.

    cache_block_size (DSA on MLA only: deepseek_v32, hy_v4): entries per block of the latent and indexer-key
    caches; 0 (the default) is 64, FlashMLA's page. An engine that schedules blocks of its own size passes it.

    caches='caller': the engine holds the cache memory and assigns the blocks, as vLLM does. It
    allocates what ``cache_specs`` asks (per group: ``block_size`` entries of ``entry_bytes`` per block,
    a block stride of at least ``block_bytes``, one tensor per layer of the group), hands the tensors to
    ``bind_caches`` once, and passes each step's ``block_tables`` ({group name: [n_requests, max_blocks]
    int32}, rows in request order). Requests then live for one step: their positions say where they
    are, the tables where their entries are.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike,
        *,
        layers: Optional[Iterable[int]] = None,
        profile: str = "deployed",
        backend: str = "cpu",
        cache_tokens: int = 1 << 16,
        max_requests_per_step: int = 64,
        caches: str = "sieve",
        state_block_size: int | str = "window",
        cache_block_size: int = 0,
    ):
        if caches not in ("sieve", "caller"):
            raise _sieve.InvalidArgumentError(f"sieve.AttentionModel: caches '{caches}', expected 'sieve' or 'caller'")
        if isinstance(state_block_size, str):
            rows = _STATE_BLOCKS.get(state_block_size)
        else:
            rows = state_block_size if type(state_block_size) is int and state_block_size > 0 else None
        if rows is None:
            raise _sieve.InvalidArgumentError(
                f"sieve.AttentionModel: state_block_size {state_block_size!r}, expected 'window', 'fit' or a number of rows")
        if type(cache_block_size) is not int or cache_block_size < 0:
            raise _sieve.InvalidArgumentError(
                f"sieve.AttentionModel: cache_block_size {cache_block_size!r}, expected a number of entries (0: the family's own)")
        self._model = _sieve.AttentionModel(
            os.fspath(checkpoint), None if layers is None else list(layers), profile, backend, cache_tokens,
            max_requests_per_step, caches == "caller", rows, cache_block_size)
        self._ids: dict[Hashable, int] = {}
        self._next_id = 1

    @property
    def model_type(self) -> str:
        return self._model.model_type

    @property
    def layers(self) -> list[int]:
        """The model's layer indices sieve runs, in order; ``forward``'s layer_pos indexes this list."""
        return self._model.layers

    @property
    def hidden_size(self) -> int:
        return self._model.hidden_size

    @property
    def max_position_embeddings(self) -> int:
        return self._model.max_position_embeddings

    @property
    def backend_name(self) -> str:
        return self._model.backend_name

    @property
    def cache_groups(self) -> list[dict]:
        """Each cache pool: name, block_size, num_blocks, used_blocks, tokens_per_entry, entry_bytes,
        layers, bytes."""
        return self._model.cache_groups

    @property
    def cache_specs(self) -> list[dict]:
        """What each cache group needs from an engine that holds the caches: name, block_size (entries
        per block), tokens_per_entry, window_tokens, entry_bytes, format, layers (the model layers in the
        group, in the order ``bind_caches`` takes their tensors), block_bytes (the least block stride)."""
        return self._model.cache_specs

    def bind_caches(self, caches: dict[str, Sequence[torch.Tensor]]) -> None:
        """caches='caller': the engine's cache tensors, {group name: [one per layer of the group]}, each
        [num_blocks, ...] (any dtype) whose stride(0) is the block stride. Kept referenced by the model."""
        self._model.bind_caches({name: list(tensors) for name, tensors in caches.items()})

    def _id(self, request_id: Hashable) -> int:
        if request_id not in self._ids:
            self._ids[request_id] = self._next_id
            self._next_id += 1
        return self._ids[request_id]

    def begin_step(self, request_ids: Sequence[Hashable], query_start_loc: torch.Tensor,
                   positions: torch.Tensor, block_tables: Optional[dict[str, torch.Tensor]] = None,
                   reuse_selection: Optional[Sequence[bool]] = None) -> None:
        """Reserves the step's cache entries (or, with the engine's caches, takes its block_tables) and
        plans the step; see the class docstring. ``reuse_selection`` (a draft model after
        ``reuse_selections()``): per request, whether its one token is a later draft token that attends with
        the selections of its last step that did not reuse."""
        if block_tables is not None:  # the engine's requests live for one step
            ids = list(range(1, len(request_ids) + 1))
        else:
            ids = [self._id(r) for r in request_ids]
        reuse = None if reuse_selection is None else [bool(r) for r in reuse_selection]
        self._model.begin_step(ids, query_start_loc, positions, block_tables, reuse)

    def reuse_selections(self) -> None:
        """Makes this the draft model of speculative decoding (a checkpoint's MTP layers, ``layers=[...]``):
        from now on a request's later draft tokens may reuse the top-k its indexer layers chose at draft step 0
        (``begin_step(..., reuse_selection=...)``; skip_topk), while every side cache is still updated, and
        ``rollback`` may undo a whole draft round (back to the start of its step 0). With sieve's own caches
        only."""
        self._model.reuse_selections()

    def forward(self, layer_pos: int, hidden_states: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Layer ``layers[layer_pos]``'s attention over the step's tokens: [n_tokens, hidden_size] in,
        the same out. Layers run in order, each once per step."""
        x = hidden_states.to(torch.float32).contiguous()  # no copy when it already is
        direct = out is not None and out.dtype == torch.float32 and out.is_contiguous()
        y = out if direct else torch.empty_like(x)
        self._model.forward(layer_pos, x, y)
        if out is None:
            return y.to(hidden_states.dtype)
        if not direct:
            out.copy_(y)
        return out

    def end_step(self) -> None:
        self._model.end_step()

    def rollback(self, request_id: Hashable, tokens: int) -> None:
        """After end_step, before the request's next step: it keeps only its first ``tokens`` tokens (a
        verification step whose later draft tokens were rejected; ``tokens`` at least the start of its last
        step, or on a draft model of its last step that did not reuse selections, ``reuse_selections``). Its
        next step starts there, and the rejected tokens leave no trace. With sieve's own caches
        only (with the engine's, every step's positions say where it starts)."""
        if request_id not in self._ids:
            raise _sieve.InvalidArgumentError(f"rollback: request {request_id!r} has run no step")
        self._model.rollback(self._ids[request_id], tokens)

    @property
    def prefix_chunk_tokens(self) -> int:
        """Tokens of a prompt chunk that prefix caching keys (the least common multiple of the cache groups'
        block spans); 0 with the engine's caches, whose block tables share prefixes."""
        return self._model.prefix_chunk_tokens

    def attach_prefix(self, request_id: Hashable, chunk_keys: Sequence[int], max_tokens: int) -> int:
        """Before a new request's first step, with sieve's own caches: ``chunk_keys[i]`` names its prompt's
        first ``i + 1`` chunks of ``prefix_chunk_tokens`` tokens (a chained hash of their token ids, unsigned
        64-bit). The request takes the cache blocks of the longest cached run of them holding at most
        ``max_tokens`` tokens (the prompt's length − 1 keeps its last token to run) and the call returns
        that many tokens: its first step starts there. Its own chunks are cached as it runs."""
        if request_id in self._ids:
            raise _sieve.InvalidArgumentError(f"attach_prefix: request {request_id!r} has already started")
        return self._model.attach_prefix(self._id(request_id), [int(k) for k in chunk_keys], max_tokens)

    def free(self, request_id: Hashable) -> None:
        """Frees a request's cache blocks (a finished, aborted or preempted request)."""
        if request_id in self._ids:
            self._model.free_request(self._ids.pop(request_id))

    def tokens_done(self, request_id: Hashable) -> int:
        """Tokens the request has run (0 for an unknown id)."""
        return self._model.tokens_done(self._ids[request_id]) if request_id in self._ids else 0

"""sieve.ops.cache_store, sparse_attention, indexer_scores and indexer_topk over paged caches, checked
against formulas written here in torch. The fp8 records are decoded here from the byte layouts vLLM's
CPU kernels use (fp8_ds_mla: 576-byte token rows then 8 scale bytes per token; indexer keys: 128 e4m3
bytes per key then one fp32 scale per key), so the tests also pin that sieve writes vLLM's bytes."""

import math

import pytest
import torch

import sieve
from sieve import ops


def ue8m0_quant(v, group):
    """ops/quant_fp8.h on float32 rows v [n, d]: e4m3 values and power-of-two scales per group."""
    g = v.reshape(v.shape[0], -1, group)
    amax = g.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax.double() / 448.0))).float()
    q = (g / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.reshape(v.shape), scale.squeeze(-1)


def blocked_cache(n_blocks, block_bytes, pad=64, fill=0xAB):
    """A uint8 cache [n_blocks, block_bytes] whose block stride is larger than a block (vLLM packs the
    pages of several layers into one block), pre-filled so that untouched bytes show."""
    storage = torch.full((n_blocks, block_bytes + pad), fill, dtype=torch.uint8)
    return storage[:, :block_bytes]


def decode_model1(cache, slots, block_size):
    """Dequantized 512-value rows of fp8_model1 entries (448 e4m3 + 64 bf16 RoPE values, 7 UE8M0 bytes)."""
    rows = []
    for s in slots.tolist():
        b, e = divmod(s, block_size)
        block = cache[b]
        data = block[e * 576 : e * 576 + 576]
        nope = data[:448].view(torch.float8_e4m3fn).float()
        rope = data[448:].view(torch.bfloat16).float()
        exps = block[block_size * 576 + e * 8 : block_size * 576 + e * 8 + 7].int()
        scales = torch.exp2((exps - 127).float())
        rows.append(torch.cat([(nope.reshape(7, 64) * scales[:, None]).reshape(448), rope]))
    return torch.stack(rows)


def decode_row_scale(cache, slot, block_size, dim=128):
    b, e = divmod(slot, block_size)
    block = cache[b]
    values = block[e * dim : (e + 1) * dim].view(torch.float8_e4m3fn).float()
    scale = block[block_size * dim + 4 * e : block_size * dim + 4 * e + 4].view(torch.float32)
    return values * scale


def test_cache_store_writes_vllm_fp8_ds_mla_bytes():
    g = torch.Generator().manual_seed(1)
    bs, nb = 4, 3
    x = (torch.randn(5, 512, generator=g) * 3).bfloat16()
    cache = blocked_cache(nb, bs * 584)
    slots = torch.tensor([7, 0, -1, 11, 5], dtype=torch.int64)  # int64 as vLLM's slot_mapping
    ops.cache_store(x, cache, slots, bs, format="fp8_model1", rope_dim=64, round_bf16=True)
    written = [s for s in slots.tolist() if s >= 0]
    rows = decode_model1(cache, torch.tensor(written), bs)
    xs = x[[i for i, s in enumerate(slots.tolist()) if s >= 0]].float()
    q, scale = ue8m0_quant(xs[:, :448], 64)
    expected_nope = (q.float().reshape(-1, 7, 64) * scale[..., None]).reshape(-1, 448)
    assert torch.equal(rows[:, :448], expected_nope)
    assert torch.equal(rows[:, 448:], xs[:, 448:])
    for s in written:  # the pad byte after the 7 scales is zero
        b, e = divmod(s, bs)
        assert cache[b, bs * 576 + e * 8 + 7].item() == 0
    # entries not written keep their bytes, and so do the bytes between blocks
    b, e = divmod(1, bs)
    assert torch.all(cache[b, e * 576 : e * 576 + 576] == 0xAB)


def test_sparse_attention_window_and_compressed_lists_with_sink():
    g = torch.Generator().manual_seed(2)
    n_tokens, n_heads, d, bs = 3, 4, 512, 4
    window = blocked_cache(4, bs * 584)
    compressed = blocked_cache(2, bs * 584)
    w_rows = (torch.randn(16, d, generator=g)).bfloat16()
    c_rows = (torch.randn(8, d, generator=g)).bfloat16()
    ops.cache_store(w_rows, window, torch.arange(16), bs, format="fp8_model1", rope_dim=64, round_bf16=True)
    ops.cache_store(c_rows, compressed, torch.arange(8), bs, format="fp8_model1", rope_dim=64, round_bf16=True)
    q = torch.randn(n_tokens, n_heads, d, generator=g).bfloat16()
    w_slots = torch.tensor([[0, 1, 2, -1], [3, 9, -1, -1], [-1, -1, -1, -1]])
    c_slots = torch.tensor([[5, -1], [0, 7], [-1, -1]])
    sink = torch.tensor([0.5, -math.inf, 2.0, -1.0])
    scale = d ** -0.5
    out = ops.sparse_attention(q, window, w_slots, bs, scale=scale, extra_kv_cache=compressed,
                               extra_slots=c_slots, extra_block_size=bs, sink=sink)
    assert out.shape == (n_tokens, n_heads, d) and out.dtype == torch.bfloat16
    for t in range(n_tokens):
        keys = [decode_model1(window, torch.tensor([s]), bs) for s in w_slots[t].tolist() if s >= 0]
        keys += [decode_model1(compressed, torch.tensor([s]), bs) for s in c_slots[t].tolist() if s >= 0]
        if not keys:  # a token with no listed entry gets 0
            assert torch.all(out[t].float() == 0)
            continue
        k = torch.cat(keys).double()
        logits = scale * (q[t].double() @ k.T)  # [n_heads, n]
        m = torch.maximum(logits.max(-1).values, sink.double())
        p = torch.exp(logits - m[:, None])
        den = p.sum(-1) + torch.exp(sink.double() - m)
        expected = (p @ k) / den[:, None]
        torch.testing.assert_close(out[t].double(), expected, rtol=1e-2, atol=2e-3)


def test_sparse_attention_f32_cache_mla_value_prefix():
    g = torch.Generator().manual_seed(3)
    d, v_dim, bs = 96, 64, 8
    cache = torch.randn(3, bs, d, generator=g)
    q = torch.randn(2, 2, d, generator=g)
    slots = torch.tensor([[1, 20, 3], [22, -1, 0]], dtype=torch.int32)
    out = ops.sparse_attention(q, cache, slots, bs, scale=0.125, format="f32", rope_dim=0, v_dim=v_dim)
    flat = cache.reshape(-1, d).double()
    for t in range(2):
        k = flat[[s for s in slots[t].tolist() if s >= 0]]
        p = torch.softmax(0.125 * (q[t].double() @ k.T), -1)
        torch.testing.assert_close(out[t].double(), p @ k[:, :v_dim], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["f32", "fp8_model1"])
def test_sparse_attention_bf16_math_rounds_the_weights(fmt):
    """math='bf16' (vLLM's kernel) rounds the softmax weights to bf16 before P·V: its output stays within
    bf16 rounding of math='f32' (≤ 2⁻⁸·max|v|, the sum of the weights being unrounded), yet differs, since
    these weights are not bf16 values."""
    g = torch.Generator().manual_seed(5)
    n_heads, d, bs = 4, 512, 4
    rows = torch.randn(16, d, generator=g)
    if fmt == "f32":
        cache, rope_dim = rows.reshape(4, bs, d).clone(), 0
        keys = rows.double()
    else:
        cache, rope_dim = blocked_cache(4, bs * 584), 64
        ops.cache_store(rows.bfloat16(), cache, torch.arange(16), bs, format=fmt, rope_dim=64, round_bf16=True)
        keys = decode_model1(cache, torch.arange(16), bs).double()
    q = torch.randn(2, n_heads, d, generator=g)
    slots = torch.tensor([[0, 3, 5, 6, 9, 10, 12, 15], [1, 2, 4, -1, 7, 8, 11, 14]], dtype=torch.int32)
    sink = torch.randn(n_heads, generator=g)
    scale = d ** -0.5

    def run(math_):
        return ops.sparse_attention(q, cache, slots, bs, scale=scale, format=fmt, rope_dim=rope_dim, sink=sink,
                                    math=math_)

    exact, deployed = run("f32"), run("bf16")
    for t in range(2):
        k = keys[[s for s in slots[t].tolist() if s >= 0]]
        logits = scale * (q[t].double() @ k.T)
        p = torch.exp(logits - torch.maximum(logits.max(-1).values, sink.double())[:, None])
        assert not torch.equal(p.float().bfloat16().double(), p)  # the weights are not bf16 values
    assert torch.all(torch.isfinite(deployed))
    assert (deployed.double() - exact.double()).abs().max() <= 2**-8 * keys.abs().max()
    assert not torch.equal(deployed, exact)


def test_sparse_attention_unknown_math():
    q = torch.zeros(1, 1, 16)
    cache = torch.zeros(1, 4, 16)
    with pytest.raises(ValueError, match=r"math 'fp16', expected 'f32' \(exact\) or 'bf16' \(deployed\)"):
        ops.sparse_attention(q, cache, torch.zeros(1, 2, dtype=torch.int32), 4, scale=1.0, format="f32",
                             rope_dim=0, math="fp16")


def indexer_setup(seed=4, n_tokens=3, n_heads=8, bs=4, n_keys_max=12):
    g = torch.Generator().manual_seed(seed)
    n_blocks = 8
    cache = blocked_cache(n_blocks, bs * 132)
    keys = torch.randn(n_blocks * bs, 128, generator=g)
    ops.cache_store(keys, cache, torch.arange(n_blocks * bs), bs, format="fp8_row_scale")
    q = torch.randn(n_tokens, n_heads, 128, generator=g)
    weights = torch.randn(n_tokens, n_heads, generator=g)
    block_table = torch.tensor([[3, 0, 5, -1], [1, 2, 6, 7], [4, 7, 0, 2]], dtype=torch.int32)[:n_tokens]
    n_keys = torch.tensor([9, 12, 0], dtype=torch.int32)[:n_tokens]
    return cache, q, weights, block_table, n_keys, bs


def indexer_formula(cache, q, weights, block_table, n_keys, bs, weight_scale):
    rows = []
    for t in range(q.shape[0]):
        ks = torch.stack([decode_row_scale(cache, int(block_table[t, j // bs]) * bs + j % bs, bs)
                          for j in range(int(n_keys[t]))]) if n_keys[t] else torch.zeros(0, 128)
        dots = q[t].double() @ ks.double().T  # [n_heads, n_keys]
        rows.append((weights[t].double()[:, None] * weight_scale * dots.clamp(min=0)).sum(0))
    return rows


def test_indexer_scores_fp8_keys():
    cache, q, weights, table, n_keys, bs = indexer_setup()
    scale = 128 ** -0.5 * 8 ** -0.5
    scores = ops.indexer_scores(q, cache, table, n_keys, bs, weights=weights, weight_scale=scale)
    assert scores.shape == (3, 12)
    for t, expected in enumerate(indexer_formula(cache, q, weights, table, n_keys, bs, scale)):
        torch.testing.assert_close(scores[t, : int(n_keys[t])].double(), expected, rtol=1e-5, atol=1e-5)


def test_indexer_topk_matches_sorting_the_formula():
    cache, q, weights, table, n_keys, bs = indexer_setup()
    selected = ops.indexer_topk(q, cache, table, n_keys, bs, 5, weights=weights, weight_scale=0.1)
    assert selected.shape == (3, 5) and selected.dtype == torch.int32
    for t, expected in enumerate(indexer_formula(cache, q, weights, table, n_keys, bs, 0.1)):
        n = int(n_keys[t])
        want = sorted(torch.topk(expected, min(5, n)).indices.tolist()) if n else []
        assert selected[t].tolist() == want + [-1] * (5 - len(want))


def test_indexer_shares_table_rows_through_token_request():
    cache, q, weights, table, n_keys, bs = indexer_setup()
    token_request = torch.tensor([1, 1, 0], dtype=torch.int32)
    scores = ops.indexer_scores(q, cache, table[:2], n_keys, bs, weights=weights, token_request=token_request)
    shared = table[token_request.long()]
    for t, expected in enumerate(indexer_formula(cache, q, weights, shared, n_keys, bs, 1.0)):
        torch.testing.assert_close(scores[t, : int(n_keys[t])].double(), expected, rtol=1e-5, atol=1e-5)


def test_cache_backends_agree_bitwise():
    cache, q, weights, table, n_keys, bs = indexer_setup()
    fast = ops.indexer_topk(q, cache, table, n_keys, bs, 4, weights=weights)
    x = torch.randn(6, 512).bfloat16()
    c_fast = blocked_cache(2, bs * 584)
    ops.cache_store(x, c_fast, torch.arange(6), bs, format="fp8_model1", rope_dim=64, round_bf16=True)
    try:
        sieve.set_backend("ref")
        oracle = ops.indexer_topk(q, cache, table, n_keys, bs, 4, weights=weights)
        c_ref = blocked_cache(2, bs * 584)
        ops.cache_store(x, c_ref, torch.arange(6), bs, format="fp8_model1", rope_dim=64, round_bf16=True)
    finally:
        sieve.set_backend("cpu")
    assert torch.equal(fast, oracle)
    assert torch.equal(c_fast, c_ref)


def test_a_slot_past_the_cache_is_refused():
    cache = blocked_cache(2, 4 * 584)
    with pytest.raises(sieve.InvalidArgumentError, match=r"slot"):
        ops.cache_store(torch.zeros(1, 512), cache, torch.tensor([8]), 4, format="fp8_model1", rope_dim=64)


def test_a_block_too_small_for_its_entries_is_refused():
    cache = blocked_cache(2, 4 * 584 - 1)
    with pytest.raises(sieve.InvalidArgumentError, match=r"kv_cache: a block holds 2335 bytes, but block_size 4"):
        ops.cache_store(torch.zeros(1, 512), cache, torch.tensor([0]), 4, format="fp8_model1", rope_dim=64)


def test_unknown_cache_format():
    with pytest.raises(sieve.InvalidArgumentError, match=r"cache format 'fp8_ds_mla'"):
        ops.cache_store(torch.zeros(1, 512), blocked_cache(1, 4 * 584), torch.tensor([0]), 4, format="fp8_ds_mla")


def test_extra_list_needs_both_parts():
    q = torch.zeros(1, 1, 16)
    cache = torch.zeros(1, 4, 16)
    with pytest.raises(sieve.InvalidArgumentError, match=r"extra_kv_cache and extra_slots come together"):
        ops.sparse_attention(q, cache, torch.zeros(1, 2, dtype=torch.int32), 4, scale=1.0, format="f32",
                             rope_dim=0, extra_kv_cache=cache)

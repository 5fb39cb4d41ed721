"""sieve.ops.Linear, GroupedLinear and output_projection (DeepSeek-V4's inverse RoPE + grouped output
projection) against formulas written here in torch (float64), on the cpu and the reference backends."""

import pytest
import torch

import sieve
from sieve import ops
from test_rows import rope_formula


@pytest.fixture(autouse=True)
def default_backend():
    yield
    sieve.set_backend("cpu")


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def e4m3_weight(n_out, n_in, seed):
    """FP8 weights and power-of-two block multipliers, with their exact float64 value (ops/linear.h)."""
    q = (randn(n_out, n_in, seed=seed) * 4).to(torch.float8_e4m3fn)
    scale = torch.pow(2.0, torch.randint(-8, 0, ((n_out + 127) // 128, (n_in + 127) // 128),
                                         generator=torch.Generator().manual_seed(seed + 1)).float())
    dense = q.double() * scale.double().repeat_interleave(128, 0)[:n_out].repeat_interleave(128, 1)[:, :n_in]
    return q, scale, dense


@pytest.mark.parametrize("backend", ["cpu", "ref"])
def test_linear_f32_is_x_times_w_transposed_plus_bias(backend):
    sieve.set_backend(backend)
    w, b, x = randn(40, 96, seed=1), randn(40, seed=2), randn(7, 96, seed=3)
    y = ops.Linear(w, bias=b)(x)
    assert y.dtype == torch.float32 and y.shape == (7, 40)
    torch.testing.assert_close(y.double(), x.double() @ w.double().T + b.double(), rtol=1e-5, atol=1e-5)


def test_linear_bf16_math_rounds_inputs_and_weights_to_bf16():
    # The deployed profile (ops/linear.h): X = bf16(x), W = bf16(W), fp32 accumulation, bf16 output.
    w, x = randn(64, 128, seed=4), randn(5, 128, seed=5)
    y = ops.Linear(w, math="bf16")(x.bfloat16())
    expected = x.bfloat16().double() @ w.bfloat16().double().T
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), expected, rtol=8e-3, atol=8e-3)  # one bf16 rounding of y
    exact = ops.Linear(w)(x)
    assert (exact.double() - expected).abs().max() > 1e-4  # the f32 profile really differs


def test_linear_fp8_weights_use_their_block_scales():
    q, scale, dense = e4m3_weight(200, 160, seed=6)
    x = randn(3, 160, seed=7)
    y = ops.Linear(q, block_scale=scale)(x)
    torch.testing.assert_close(y.double(), x.double() @ dense.T, rtol=1e-5, atol=1e-5)


def test_linear_writes_into_a_column_slice_and_outlives_set_backend():
    w, x = randn(16, 32, seed=8), randn(4, 32, seed=9)
    linear = ops.Linear(w)
    made_on = sieve.backend_name()
    sieve.set_backend("ref")  # the prepared weights keep running on the backend that packed them
    wide = torch.zeros(4, 48)
    linear(x, out=wide[:, 16:32])
    torch.testing.assert_close(wide[:, 16:32].double(), x.double() @ w.double().T, rtol=1e-5, atol=1e-5)
    assert (wide[:, :16] == 0).all() and (wide[:, 32:] == 0).all()
    assert made_on in repr(linear)


def test_linear_errors_name_the_argument():
    w = randn(16, 32, seed=10)
    with pytest.raises(sieve.InvalidArgumentError, match=r"sieve.ops.Linear: x: .*in_features"):
        ops.Linear(w)(randn(4, 31))
    with pytest.raises(sieve.InvalidArgumentError, match=r"weight: float8_e4m3fn weights need block_scale"):
        ops.Linear(w.to(torch.float8_e4m3fn))
    with pytest.raises(sieve.InvalidArgumentError, match=r"block_scale: .*shape"):
        ops.Linear(w.to(torch.float8_e4m3fn), block_scale=torch.ones(2, 2))
    with pytest.raises(sieve.InvalidArgumentError, match=r"math 'fp8'"):
        ops.Linear(w, math="fp8")
    with pytest.raises(sieve.InvalidArgumentError, match=r"sieve.ops.Linear: out: dtype"):
        ops.Linear(w)(randn(4, 32), out=torch.empty(4, 16, dtype=torch.float16))


def test_grouped_linear_is_the_per_group_einsum():
    G, R, K = 4, 24, 40
    w, x = randn(G * R, K, seed=11), randn(6, G, K, seed=12)
    z = ops.GroupedLinear(w, G)(x)
    expected = torch.einsum("tgk,grk->tgr", x.double(), w.double().view(G, R, K)).reshape(6, G * R)
    torch.testing.assert_close(z.double(), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(sieve.InvalidArgumentError, match="does not split into 5 row blocks"):
        ops.GroupedLinear(w, 5)
    q, scale, _ = e4m3_weight(G * 32, K, seed=13)
    with pytest.raises(sieve.InvalidArgumentError, match="split 128-row scale blocks"):
        ops.GroupedLinear(q, G, block_scale=scale)


@pytest.mark.parametrize("backend", ["cpu", "ref"])
def test_output_projection_is_inverse_rope_then_grouped_wo_a_then_wo_b(backend):
    # specs deepseek_v4.md §3.9 with H = 8 heads of d = 32 (r = 16 rotated), G = 2 groups, R_o = 128
    # (FP8 wo_a as in the release: each group whole 128-row scale blocks), hidden 48.
    sieve.set_backend(backend)
    T, H, d, r, G, Ro, D = 5, 8, 32, 16, 2, 128, 48
    # positions under 400: fp32 angle products further out differ from float64 (test_rows.py covers them)
    o, positions = randn(T, H, d, seed=14), torch.tensor([0, 3, 17, 200, 399])
    inv_freq = ops.rope_inv_freq(r, 10000.0)
    wa_q, wa_scale, wa = e4m3_weight(G * Ro, H // G * d, seed=15)
    wb = randn(D, G * Ro, seed=16) * 0.05
    wo_a, wo_b = ops.GroupedLinear(wa_q, G, block_scale=wa_scale), ops.Linear(wb)
    derotated = rope_formula(o, positions, inv_freq, "interleaved", "last", inverse=True)
    z = torch.einsum("tgk,grk->tgr", derotated.reshape(T, G, -1), wa.view(G, Ro, -1)).reshape(T, G * Ro)
    torch.testing.assert_close(ops.output_projection(o, positions, inv_freq, wo_a).double(), z, rtol=1e-5, atol=1e-4)
    out = ops.output_projection(o, positions, inv_freq, wo_a, wo_b)
    assert out.dtype == torch.float32 and out.shape == (T, D)
    torch.testing.assert_close(out.double(), z @ wb.double().T, rtol=1e-5, atol=1e-4)

"""sieve.ops.rope, rope_inv_freq and quant_fp8 against formulas written here in torch (float64), and
against the scalar reference backend."""

import math

import pytest
import torch

import sieve
from sieve import ops


def rope_formula(x, positions, inv_freq, pairing, slice_, inverse):
    """ops/rope.h "Rotation", in float64."""
    x = x.double()
    n_tokens, n_heads, head_dim = x.shape
    r = 2 * inv_freq.numel()
    n = 0 if slice_ == "first" else head_dim - r
    angle = positions.double()[:, None] * inv_freq.double()[None, :]  # [n_tokens, r/2]
    c, s = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    part = x[..., n : n + r]
    if pairing == "interleaved":
        x0, x1 = part[..., 0::2], part[..., 1::2]
    else:
        x0, x1 = part[..., : r // 2], part[..., r // 2 :]
    if inverse:
        y0, y1 = x0 * c + x1 * s, x1 * c - x0 * s
    else:
        y0, y1 = x0 * c - x1 * s, x0 * s + x1 * c
    y = x.clone()
    if pairing == "interleaved":
        y[..., n : n + r : 2], y[..., n + 1 : n + r : 2] = y0, y1
    else:
        y[..., n : n + r // 2], y[..., n + r // 2 : n + r] = y0, y1
    return y


@pytest.fixture(autouse=True)
def default_backend():
    yield
    sieve.set_backend("cpu")


def test_version_is_the_library_version():
    assert sieve.__version__.count(".") == 2
    assert sieve.backend_name().startswith("cpu")


def test_rope_inv_freq_is_base_power():
    f = ops.rope_inv_freq(64, 10000.0)
    expected = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert f.dtype == torch.float32 and f.shape == (32,)
    torch.testing.assert_close(f.double(), expected, rtol=2e-7, atol=0)


@pytest.mark.parametrize("pairing", ["interleaved", "half_split"])
@pytest.mark.parametrize("slice_", ["first", "last"])
@pytest.mark.parametrize("inverse", [False, True])
def test_rope_matches_formula(pairing, slice_, inverse):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(7, 3, 96, generator=g)
    positions = torch.tensor([0, 1, 5, 17, 300, 4095, 65000])
    inv_freq = ops.rope_inv_freq(64, 160000.0)
    y = ops.rope(x, positions, inv_freq, pairing=pairing, slice=slice_, inverse=inverse)
    expected = rope_formula(x, positions, inv_freq, pairing, slice_, inverse)
    # fp32 angle products at position 65000 differ from float64 by up to ~65000·2^-24 rad.
    torch.testing.assert_close(y.double(), expected, rtol=0, atol=1e-2)
    near = positions < 400
    torch.testing.assert_close(y[near].double(), expected[near], rtol=0, atol=1e-4)


def test_rope_inverse_undoes_forward_in_place():
    x = torch.randn(5, 2, 64)
    positions = torch.arange(5, dtype=torch.int32) * 11
    inv_freq = ops.rope_inv_freq(32, 10000.0)
    y = x.clone()
    ptr = y.data_ptr()
    ops.rope(y, positions, inv_freq, out=y)
    ops.rope(y, positions, inv_freq, inverse=True, out=y)
    assert y.data_ptr() == ptr  # written in place: the engine saw the tensor's own memory
    torch.testing.assert_close(y, x, rtol=0, atol=2e-6)
    assert not torch.equal(ops.rope(x, positions + 1, inv_freq), x)


def test_rope_cpu_and_ref_backends_agree_bitwise():
    x = torch.randn(9, 4, 128).bfloat16()
    positions = torch.arange(9) * 1000
    inv_freq = ops.rope_inv_freq(64, 10000.0, yarn_factor=40.0, original_max_position=4096)
    fast = ops.rope(x, positions, inv_freq, pairing="half_split", slice="first")
    sieve.set_backend("ref")
    assert sieve.backend_name() == "ref"
    oracle = ops.rope(x, positions, inv_freq, pairing="half_split", slice="first")
    assert torch.equal(fast.view(torch.int16), oracle.view(torch.int16))


def quant_formula(x, group_size):
    """ops/quant_fp8.h "Semantics" for finite groups: UE8M0 scale 2^ceil(log2(max(amax, 1e-4)/448))."""
    g = x.float().reshape(*x.shape[:-1], -1, group_size)
    amax = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax.double() / 448.0))).float()
    q = (g / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.reshape(x.shape), scale.squeeze(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quant_fp8_matches_formula(dtype):
    x = (torch.randn(6, 2, 256) * torch.logspace(-3, 3, 6)[:, None, None]).to(dtype)
    x[0, 0, :128] = 0.0  # an all-zero group: the amax clamp 1e-4 gives it the scale 2^ceil(log2(1e-4 / 448)) = 2^-22
    q, scales = ops.quant_fp8(x, 128)
    q_ref, scales_ref = quant_formula(x, 128)
    assert q.dtype == torch.float8_e4m3fn and scales.shape == (6, 2, 2)
    assert torch.equal(scales, scales_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert scales[0, 0, 0].item() == 2.0**-22
    deq, deq_scales = ops.quant_fp8(x, 128, dequant=True)
    assert torch.equal(deq_scales, scales)
    expected = (q.float().reshape(6, 2, 2, 128) * scales[..., None]).reshape(6, 2, 256).to(dtype)
    assert torch.equal(deq, expected)


def test_quant_fp8_two_dimensional_rows():
    x = torch.randn(3, 64)
    q, scales = ops.quant_fp8(x, 64)
    assert q.shape == (3, 64) and scales.shape == (3, 1)


def test_bad_dtype_names_the_argument():
    with pytest.raises(sieve.InvalidArgumentError, match=r"sieve\.ops\.rope: x: dtype f16, expected f32 or bf16"):
        ops.rope(torch.zeros(2, 1, 8, dtype=torch.float16), torch.arange(2), ops.rope_inv_freq(8, 10000.0))


def test_bad_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"positions: shape \[3\], expected \[2\]"):
        ops.rope(torch.zeros(2, 1, 8), torch.arange(3), ops.rope_inv_freq(8, 10000.0))


def test_strided_rows_are_refused():
    x = torch.zeros(2, 1, 16)[..., ::2]
    with pytest.raises(sieve.InvalidArgumentError, match=r"x: the last dimension has stride 2"):
        ops.rope(x, torch.arange(2), ops.rope_inv_freq(8, 10000.0))


def test_group_size_must_divide():
    with pytest.raises(sieve.InvalidArgumentError, match=r"group_size 48 does not divide dim 64"):
        ops.quant_fp8(torch.zeros(2, 64), 48)


def test_contract_errors_come_through():
    # rot_dim 2·8 = 16 > head_dim 8: only the op's own validate() knows.
    with pytest.raises(sieve.InvalidArgumentError, match=r"rot_dim"):
        ops.rope(torch.zeros(2, 1, 8), torch.arange(2), ops.rope_inv_freq(16, 10000.0))


def test_unknown_backend_spec():
    with pytest.raises(sieve.SieveError, match=r"no_such_backend"):
        sieve.set_backend("no_such_backend")
    assert sieve.backend_name().startswith("cpu")


def test_error_classes_derive_from_builtins():
    assert issubclass(sieve.InvalidArgumentError, ValueError)
    assert issubclass(sieve.UnsupportedError, NotImplementedError)
    assert issubclass(sieve.NotFoundError, LookupError)
    assert issubclass(sieve.OutOfMemoryError, MemoryError)
    for cls in (sieve.InvalidArgumentError, sieve.UnsupportedError, sieve.InternalError):
        assert issubclass(cls, sieve.SieveError)

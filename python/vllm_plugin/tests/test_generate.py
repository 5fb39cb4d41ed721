"""vLLM with the sieve plugin generates what transformers generates (greedy, fp32: sieve's exact profile)
on the bundled random-weight checkpoints (tests/data/<model_type>/ckpt, made by tools/golden through
transformers), one prompt shorter and two longer than the indexer's top-k, batched and alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

DATA = Path(__file__).resolve().parents[3] / "tests" / "data"
SCRIPT = Path(__file__).with_name("vllm_generate.py")
PROMPTS = [[2, 3, 4, 5, 6, 7],
           [9, 8, 7, 6, 5, 4, 3, 2, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22],
           [(7 * i + 3) % 60 + 1 for i in range(40)]]
NEW_TOKENS = 8


def transformers_generate(checkpoint, prompts=PROMPTS):
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
        out.append(gen[0, len(p):].tolist())
    return out


def vllm_generate(checkpoint, tmp_path, prompts=PROMPTS, dtype="float32", blocks=64):
    prompts_file = tmp_path / "prompts.json"
    prompts_file.write_text(json.dumps(prompts))
    run = subprocess.run([sys.executable, str(SCRIPT), str(checkpoint), dtype, str(prompts_file), str(blocks)],
                         capture_output=True,
                         text=True, timeout=900, env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "nobind"})
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
    assert run.returncode == 0 and lines, f"vLLM failed (exit {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-8000:]}"
    # The engine process says that sieve runs the attention (sieve_vllm/attention.py SieveStack).
    assert "sieve-vllm: " in run.stdout + run.stderr, "the sieve plugin did not load"
    return json.loads(lines[-1][len("RESULT "):])


def test_deepseek_v32_tokens_equal_transformers(tmp_path):
    checkpoint = DATA / "deepseek_v32" / "ckpt"
    config = json.loads((checkpoint / "config.json").read_text())
    assert len(PROMPTS[1]) > config["index_topk"] and len(PROMPTS[2]) > config["index_topk"]  # the top-k selects
    expected = transformers_generate(checkpoint)
    got = vllm_generate(checkpoint, tmp_path)
    assert got["batched"] == expected, (got, expected)
    assert got["alone"] == expected, (got, expected)


def test_deepseek_v32_with_too_few_blocks_for_all_requests(tmp_path):
    # Three 68-token requests need 2 blocks of 64 entries in each of sieve's two cache groups; vLLM has 4
    # blocks, one request's worth, so it has to hold requests back or preempt them (freeing their blocks
    # and recomputing them later into others): sieve must follow whatever tables it is given.
    checkpoint = DATA / "deepseek_v32" / "ckpt"
    prompts = [[(k * i + 5) % 60 + 1 for i in range(60)] for k in (3, 7, 11)]
    got = vllm_generate(checkpoint, tmp_path, prompts, blocks=4)
    expected = transformers_generate(checkpoint, prompts)
    assert got["batched"] == expected, (got, expected)

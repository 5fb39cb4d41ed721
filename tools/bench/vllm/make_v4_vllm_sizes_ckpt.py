#!/usr/bin/env python3
"""Write a random-weight DeepSeek-V4 checkpoint with the sizes vLLM 0.32's CPU attention hard-codes.

vLLM's own CPU attention for deepseek_v4 (``vllm/models/deepseek_v4/cpu/cpu_sparse.py``) only runs the
release sizes: its C++ ops take q/out rows of 512 (``flash_mla_with_kvcache_cpu``), RoPE over the last 64
dims (``_ROPE_DIM``, cpu_sparse.py:40), indexer heads of 128 (``fp8_paged_mqa_logits_cpu``), a top-k of
exactly 512 (``topk_transform_512_cpu``; ``sparse_attn_indexer.py`` asserts it), an HCA compressor whose
state block is 8 (ratio 128) and a grouped ``wo_a`` whose rank is a multiple of 32 (``bmm_cpu``). The
project's golden checkpoint (tools/golden, head_dim 32) is too small for it, so this script writes one
with those sizes and everything else as small as the golden one.

The model is built by the golden generator itself (tools/golden/make_golden.py): its deepseek_v4
family's config (``_config_deepseek_v4``: RoPE/YaRN parameters, eps, mHC, layer schedule sliding / CSA /
HCA), its weight initialisation (``build_model``: seeded ``init_weights``) and transformers'
``save_pretrained``; only the fields in ``VLLM_SIZES`` (and ``--set``) replace the family's values, by
wrapping transformers' ``DeepseekV4Config`` while ``_config_deepseek_v4`` runs, so make_golden.py needs no
hook. No golden tensors are written (the reference is the transformers model of this checkpoint).

    python make_v4_vllm_sizes_ckpt.py --out DIR [--seed 19] [--set num_attention_heads=64 ...]

The checkpoint is config.json + model.safetensors (fp32, a few MB with the default sizes). Calling it
again with the same arguments keeps an existing checkpoint (``ckpt_stamp.json`` records them).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "golden"))
import make_golden  # noqa: E402  (the golden generator: its deepseek_v4 family, init and save)

# What replaces make_golden's deepseek_v4 values. head_dim .. o_lora_rank: vLLM's CPU kernels; the rest
# keeps the model tiny while giving MoE routing a real choice (4 experts, top-2).
VLLM_SIZES = {
    "head_dim": 512,
    "partial_rotary_factor": 64 / 512,  # qk_rope_head_dim 64
    "index_head_dim": 128,
    "index_topk": 512,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    "o_lora_rank": 32,
    "sliding_window": 128,  # the release window (vLLM reads it from the config; 128 is what it was built for)
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
}
STAMP = "ckpt_stamp.json"


@contextlib.contextmanager
def _config_overrides(overrides: dict):
    """transformers' DeepseekV4Config, as ``_config_deepseek_v4`` imports it, with ``overrides`` applied."""
    import transformers

    original = transformers.DeepseekV4Config

    def config(**kwargs):
        return original(**{**kwargs, **overrides})

    with mock.patch.object(transformers, "DeepseekV4Config", config):
        yield


def family(overrides: dict | None = None) -> make_golden.Family:
    """make_golden's deepseek_v4 family whose model has ``VLLM_SIZES`` (and ``overrides``)."""
    sizes = {**VLLM_SIZES, **(overrides or {})}

    def config():
        with _config_overrides(sizes):
            return make_golden._config_deepseek_v4()

    return dataclasses.replace(make_golden.DEEPSEEK_V4, config=config)


def make_checkpoint(out_dir: str | os.PathLike, seed: int = make_golden.DEFAULT_SEED,
                    overrides: dict | None = None) -> Path:
    """Writes the checkpoint into ``out_dir`` (kept if it was written with the same arguments)."""
    out = Path(out_dir)
    stamp = {"generator": "tools/bench/vllm/make_v4_vllm_sizes_ckpt.py", "seed": seed,
             "sizes": {**VLLM_SIZES, **(overrides or {})}, "reference": make_golden.reference_string()}
    if (out / STAMP).is_file() and json.loads((out / STAMP).read_text()) == stamp:
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    make_golden.set_determinism()
    model = make_golden.build_model(family(overrides), seed)
    model.save_pretrained(str(out))
    gen_cfg = out / "generation_config.json"  # make_golden's layout: config.json + model.safetensors
    if gen_cfg.exists():
        gen_cfg.unlink()
    for f in out.iterdir():  # save_pretrained creates the weights file with mode 0600
        f.chmod(0o644)
    (out / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    return out


def load_reference(ckpt_dir: str | os.PathLike, overrides: dict | None = None):
    """The fp32 transformers model of a checkpoint written here (make_golden.load_model)."""
    return make_golden.load_model(family(overrides), str(ckpt_dir))


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True,
                    help="checkpoint directory (replaced unless written with the same arguments)")
    ap.add_argument("--seed", type=int, default=make_golden.DEFAULT_SEED)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                    help="another transformers DeepseekV4Config field value, e.g. num_attention_heads=64 "
                         "(repeatable)")
    args = ap.parse_args(argv)
    overrides = {}
    for item in args.set:
        field, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set {item!r}: expected FIELD=VALUE")
        overrides[field] = _value(value)
    out = make_checkpoint(args.out, args.seed, overrides)
    cfg = json.loads((out / "config.json").read_text())
    print(f"{out}: head_dim {cfg['head_dim']}, qk_rope_head_dim {cfg['qk_rope_head_dim']}, "
          f"layers {cfg['layer_types']}, "
          f"compress_rates {cfg['compress_rates']}, index_topk {cfg['index_topk']}, heads {cfg['num_attention_heads']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

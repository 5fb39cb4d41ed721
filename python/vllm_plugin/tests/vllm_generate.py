"""Greedy generation through vLLM (run as a script: vLLM's CPU workers are spawned processes, which
re-import the main module, so the engine is made under the __main__ guard).

    python vllm_generate.py <checkpoint-dir> <prompts.json> '<engine arguments as JSON>'   → prints one line:
    RESULT {"batched": [[token, ...] per prompt], "alone": [[...] per prompt],
            "cached": {"batched": [prompt tokens a cached prefix gave, per prompt], "alone": [...]}}

The engine arguments (dtype, block_size, num_gpu_blocks_override: few blocks make vLLM preempt and
recompute, hf_overrides, ...) are added to the defaults below.
"""

import json
import os
import sys


def main():
    checkpoint, prompts_file, engine_json = sys.argv[1:4]
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    prompts = json.loads(open(prompts_file).read())
    args = dict(skip_tokenizer_init=True, enforce_eager=True, max_model_len=128, max_num_seqs=4,
                max_num_batched_tokens=64, block_size=64, enable_prefix_caching=False)
    args.update(json.loads(engine_json))
    llm = LLM(model=checkpoint, **args)
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True, detokenize=False)
    batched = llm.generate([{"prompt_token_ids": p} for p in prompts], params)
    alone = [llm.generate([{"prompt_token_ids": p}], params)[0] for p in prompts]
    print("RESULT " + json.dumps({"batched": [list(o.outputs[0].token_ids) for o in batched],
                                  "alone": [list(o.outputs[0].token_ids) for o in alone],
                                  "cached": {"batched": [o.num_cached_tokens for o in batched],
                                             "alone": [o.num_cached_tokens for o in alone]}}), flush=True)


if __name__ == "__main__":
    main()

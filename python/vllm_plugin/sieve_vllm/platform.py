"""vLLM's CPU platform rules that are about vLLM's own attention kernels, kept away from models sieve runs.

vLLM 0.32's ``CpuPlatform.check_and_update_config`` turns off chunked prefill and prefix caching for every
MLA model on a CPU without AMX: its reference CPU MLA backend supports neither (with AMX its own kernels
do, and the rule is skipped). For the DSA models the plugin registers, sieve runs the whole attention, so
that rule does not apply to them: the choices the user made are kept. Both are verified on those models
by tests/test_generate.py (batches of 64 tokens split the prompts; prefix-caching hits give the
reference's tokens), on CPUs with and without AMX alike.
"""

# The model types whose attention sieve runs with vLLM's prefix caching and chunked prefill (verified).
PREFIX_CACHING_VERIFIED = ("deepseek_v32", "hy_v4")


def install_scheduling_rules(sieve_architectures) -> None:
    """Wraps CpuPlatform.check_and_update_config (idempotent): for a model of PREFIX_CACHING_VERIFIED
    whose architecture is one of `sieve_architectures`, the scheduler and cache choices vLLM's MLA rule
    overrides are put back as they were asked for."""
    from vllm.logger import init_logger
    from vllm.platforms.cpu import CpuPlatform

    vllm_rules = CpuPlatform.check_and_update_config
    if getattr(vllm_rules, "_sieve_rules", False):
        return
    sieve_architectures = frozenset(sieve_architectures)

    def check_and_update_config(cls, vllm_config) -> None:
        model_config = vllm_config.model_config
        sieve_runs = (model_config is not None
                      and getattr(model_config.hf_config, "model_type", None) in PREFIX_CACHING_VERIFIED
                      and bool(sieve_architectures.intersection(model_config.architectures or ())))
        scheduler, cache = vllm_config.scheduler_config, vllm_config.cache_config
        asked = (scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens, cache.enable_prefix_caching)
        vllm_rules.__func__(cls, vllm_config)
        now = (scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens, cache.enable_prefix_caching)
        if sieve_runs and now != asked:
            # Without chunked prefill a step must hold a whole prompt: vLLM's larger step then stays.
            tokens = asked[1] if asked[0] else max(asked[1], now[1])
            scheduler.enable_chunked_prefill, scheduler.max_num_batched_tokens, cache.enable_prefix_caching = (
                asked[0], tokens, asked[2])
            init_logger("vllm.sieve_vllm").info(
                "sieve-vllm: sieve runs the attention of %s, so chunked prefill (%s, %d tokens a step) and prefix "
                "caching (%s) stay as asked", model_config.hf_config.model_type, asked[0], tokens, asked[2])

    check_and_update_config._sieve_rules = True
    CpuPlatform.check_and_update_config = classmethod(check_and_update_config)

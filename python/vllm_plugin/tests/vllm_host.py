"""What vLLM's CPU build can run on this host.

vLLM 0.32's CPU wheel loads one of three kernel libraries by the host's ISA (platforms/cpu.py
import_kernels: AVX-512 with BF16, AVX-512, or AVX2). Its deepseek_v4 model needs ops that only the
AVX-512 builds register (the hyper-connection op hc_pre_fused_cpu; its own V4 attention also
convert_weight_packed): on an AVX2-only host vLLM cannot run that model at all, with or without sieve,
and the tests that need it skip, naming the missing ops.
"""

import pytest
import torch


def missing_vllm_cpu_ops(*names):
    """The names among `names` that torch.ops._C lacks once vLLM's platform has loaded its CPU kernels."""
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    return [n for n in names if not hasattr(torch.ops._C, n)]


def skip_unless_vllm_cpu_ops(model, *names):
    missing = missing_vllm_cpu_ops(*names)
    if missing:
        pytest.skip(f"vLLM's CPU build on this host ({'AVX-512' if torch.cpu._is_avx512_supported() else 'AVX2'} "
                    f"kernels) lacks torch.ops._C.{', torch.ops._C.'.join(missing)}, which vLLM's {model} needs: "
                    f"vLLM cannot run {model} here")

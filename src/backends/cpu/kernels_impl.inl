// Kernel bodies of the cpu backend, written once over simd.h and compiled once per ISA by
// kernels_<isa>.cpp, which defines SIEVE_CPU_TABLE (the table's name), SIEVE_CPU_ISA_NAME and
// SIEVE_CPU_ISA_NS before including this file. The kernels live in namespace sieve::cpu::<isa> (so
// profiles name op, dtype template arguments and ISA: sieve::cpu::avx512::…::rms_norm_rows_t<true, …>)
// inside an anonymous namespace (see simd.h, "ODR safety"). Semantics: the ops/*.h contracts; where a
// comment says "bit-identical to ref", the conformance tests compare bytes.
#include "backends/cpu/kernels.h"
#include "backends/cpu/simd.h"

#if !defined(SIEVE_CPU_TABLE) || !defined(SIEVE_CPU_ISA_NAME) || !defined(SIEVE_CPU_ISA_NS)
#error "define SIEVE_CPU_TABLE, SIEVE_CPU_ISA_NAME and SIEVE_CPU_ISA_NS before including kernels_impl.inl"
#endif

namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// One file per op family, in this order (later parts use helpers of earlier ones).
#include "backends/cpu/norm_kernels_impl.inl"
#include "backends/cpu/rope_kernels_impl.inl"
#include "backends/cpu/quant_fp8_kernels_impl.inl"
#include "backends/cpu/hadamard_kernels_impl.inl"
#include "backends/cpu/linear_kernels_impl.inl"
#include "backends/cpu/topk_kernels_impl.inl"

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const CpuKernels SIEVE_CPU_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
    .rms_norm_rows = SIEVE_CPU_ISA_NS::rms_norm_rows,
    .layer_norm_rows = SIEVE_CPU_ISA_NS::layer_norm_rows,
    .quant_fp8_rows = SIEVE_CPU_ISA_NS::quant_fp8_rows,
    .quant_fp8_group = SIEVE_CPU_ISA_NS::quant_fp8_group,
    .hadamard_rows = SIEVE_CPU_ISA_NS::hadamard_rows,
    .rope_block = SIEVE_CPU_ISA_NS::rope_block,
    .linear_tile = SIEVE_CPU_ISA_NS::linear_tile,
    .linear_convert_x = SIEVE_CPU_ISA_NS::linear_convert_x,
    .linear_convert_x_pairs = SIEVE_CPU_ISA_NS::linear_convert_x_pairs,
    .convert_f32_to_bf16_rows = SIEVE_CPU_ISA_NS::convert_f32_to_bf16_rows,
    .topk_stream_push = SIEVE_CPU_ISA_NS::topk_stream_push,
    .topk_stream_finish = SIEVE_CPU_ISA_NS::topk_stream_finish,
};

}  // namespace sieve::cpu

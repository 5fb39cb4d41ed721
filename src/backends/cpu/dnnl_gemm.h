// oneDNN matmul behind the cpu backend's linear: weights packed once into oneDNN's blocked
// layout, primitives created per batch shape at plan time, execution without allocation.
// Built only with SIEVE_WITH_DNNL; callers check cpu_backend_has_dnnl() first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "sieve/core/status.h"

namespace sieve::cpu {

struct DnnlPackedWeights;  // packed W [n, k] (f32 or bf16) and f32 bias [n]
struct DnnlGemmPlan;       // primitives and memory objects for one batch shape

// Caps oneDNN's ISA at active_isa() (once per process, before any primitive exists) and returns the
// name of the ISA it will use, e.g. "avx512_core_bf16".
const char* dnnl_isa_name();

// w: [n, k] row-major, f32 when !bf16 else bf16 bits; bias: [n] f32 or nullptr.
// Caps the OpenMP threads oneDNN's GEMMs use (n ≥ 1).
void dnnl_set_threads(int n);

Expected<std::shared_ptr<const DnnlPackedWeights>> dnnl_pack_weights(const void* w, bool bf16, int64_t n, int64_t k,
                                                                     const float* bias);
size_t dnnl_packed_bytes(const DnnlPackedWeights& w);

// For m rows, run in chunks of at most chunk_rows: src rows in the packed compute dtype with row stride
// src_stride (elements), dst f32 rows with row stride dst_stride.
Expected<std::shared_ptr<DnnlGemmPlan>> dnnl_plan(const DnnlPackedWeights& w, int64_t m, int64_t chunk_rows,
                                                  int64_t src_stride, int64_t dst_stride);
size_t dnnl_scratchpad_bytes(const DnnlGemmPlan& plan);
// dst[r, :] = src[r, :] · Wᵀ + bias for rows [row0, row0 + rows), rows ≤ chunk_rows and equal to either
// chunk_rows or m % chunk_rows. scratchpad: dnnl_scratchpad_bytes() bytes.
Status dnnl_run(const DnnlPackedWeights& w, DnnlGemmPlan& plan, const void* src, float* dst, int64_t rows,
                void* scratchpad);

}  // namespace sieve::cpu

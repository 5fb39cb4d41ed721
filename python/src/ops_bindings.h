// The op bindings, by file: each adds its ops to the submodule sieve._sieve.ops (python/sieve/ops.py
// wraps them with torch-native signatures that allocate the outputs).
#pragma once

#include <nanobind/nanobind.h>

namespace sieve::python {

void bind_row_ops(nanobind::module_& ops);        // ops_rows.cpp: rope, rope_inv_freq, quant_fp8
void bind_attention_ops(nanobind::module_& ops);  // ops_attention.cpp: cache_store, sparse_attention, indexer_scores
void bind_linear(nanobind::module_& ops);         // ops_linear.cpp: Linear (prepared weights)

}  // namespace sieve::python

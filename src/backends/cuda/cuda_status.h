// CUDA runtime and cuBLAS errors as Status: out_of_memory for allocation failures, unsupported for a missing
// device or driver, internal for the rest, each naming the call and the runtime's own message.
#pragma once

#include <string_view>

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "sieve/core/status.h"

namespace sieve::cuda {

Status cuda_status(cudaError_t error, std::string_view what);
Status cublas_status(cublasStatus_t status, std::string_view what);

}  // namespace sieve::cuda

// Returns the call's Status from the enclosing function when the CUDA call failed.
#define SIEVE_CUDA_RETURN_IF_ERROR(call, what) SIEVE_RETURN_IF_ERROR(::sieve::cuda::cuda_status((call), (what)))

#include "backends/cuda/cuda_status.h"

namespace sieve::cuda {

Status cuda_status(cudaError_t error, std::string_view what) {
    if (error == cudaSuccess) return Status::ok();
    const char* name = cudaGetErrorName(error);
    const char* message = cudaGetErrorString(error);
    switch (error) {
        case cudaErrorMemoryAllocation:
            return out_of_memory_error("cuda: {}: {} ({})", what, name, message);
        case cudaErrorNoDevice:
        case cudaErrorInsufficientDriver:
        case cudaErrorInvalidDevice:
        case cudaErrorNoKernelImageForDevice:
            return unsupported_error("cuda: {}: {} ({})", what, name, message);
        default:
            return internal_error("cuda: {}: {} ({})", what, name, message);
    }
}

Status cublas_status(cublasStatus_t status, std::string_view what) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return Status::ok();
        case CUBLAS_STATUS_ALLOC_FAILED: return out_of_memory_error("cublas: {}: {}", what, cublasGetStatusString(status));
        case CUBLAS_STATUS_NOT_SUPPORTED:
        case CUBLAS_STATUS_ARCH_MISMATCH: return unsupported_error("cublas: {}: {}", what, cublasGetStatusString(status));
        default: return internal_error("cublas: {}: {}", what, cublasGetStatusString(status));
    }
}

}  // namespace sieve::cuda

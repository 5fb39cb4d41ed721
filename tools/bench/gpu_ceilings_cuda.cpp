// measure_gpu_ceilings on a CUDA GPU (gpu_ceilings.h): its own stream, events and cuBLAS handle, freed
// on every path.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "gpu_ceilings.h"

namespace sieve::bench {

namespace {

Status cuda_ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return Status::ok();
    return internal_error("GPU ceilings: {}: {}", what, cudaGetErrorString(e));
}
Status cublas_ok(cublasStatus_t s, const char* what) {
    if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
    return internal_error("GPU ceilings: {}: cuBLAS status {}", what, static_cast<int>(s));
}

struct DeviceMemory {
    void* p = nullptr;
    ~DeviceMemory() {
        if (p != nullptr) cudaFree(p);
    }
};

// The stream, events and cuBLAS handle of one measurement.
class Probe {
public:
    ~Probe() {
        if (cublas_ != nullptr) cublasDestroy(cublas_);
        if (start_ != nullptr) cudaEventDestroy(start_);
        if (stop_ != nullptr) cudaEventDestroy(stop_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }
    Status init() {
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventCreate(&start_), "creating an event"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventCreate(&stop_), "creating an event"));
        SIEVE_RETURN_IF_ERROR(cublas_ok(cublasCreate(&cublas_), "creating a handle"));
        return cublas_ok(cublasSetStream(cublas_, stream_), "setting the stream");
    }
    // Seconds of each of `reps` calls of `body` (after one untimed call).
    template <class Body>
    Expected<std::vector<double>> time(int reps, Body&& body) {
        SIEVE_RETURN_IF_ERROR(body());
        std::vector<double> out;
        for (int r = 0; r < reps; ++r) {
            SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventRecord(start_, stream_), "recording an event"));
            SIEVE_RETURN_IF_ERROR(body());
            SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventRecord(stop_, stream_), "recording an event"));
            SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventSynchronize(stop_), "waiting for an event"));
            float ms = 0;
            SIEVE_RETURN_IF_ERROR(cuda_ok(cudaEventElapsedTime(&ms, start_, stop_), "elapsed time"));
            out.push_back(ms * 1e-3);
        }
        return out;
    }
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }

private:
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
};

Ceiling best_of(std::string name, std::string unit, int device, const std::vector<double>& seconds, double work) {
    const auto [lo, hi] = std::minmax_element(seconds.begin(), seconds.end());
    Ceiling c;
    c.name = std::move(name);
    c.unit = std::move(unit);
    c.isa = fmt::format("cuda:{}", device);
    c.threads = 0;
    c.value = work / *lo;
    c.spread = (*hi - *lo) / *hi;  // (best − worst) / best of the rates
    return c;
}

}  // namespace

Expected<std::vector<Ceiling>> measure_gpu_ceilings(int device, bool quick) {
    SIEVE_RETURN_IF_ERROR(cuda_ok(cudaSetDevice(device), "selecting the device"));
    Probe probe;
    SIEVE_RETURN_IF_ERROR(probe.init());
    const int reps = quick ? 3 : 10;
    std::vector<Ceiling> out;
    {
        const size_t bytes = quick ? size_t{64} << 20 : size_t{2} << 30;
        DeviceMemory src, dst;
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMalloc(&src.p, bytes), "allocating the copy source"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMalloc(&dst.p, bytes), "allocating the copy destination"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMemsetAsync(src.p, 1, bytes, probe.stream()), "filling the copy source"));
        SIEVE_ASSIGN_OR_RETURN(auto t, probe.time(reps, [&] {
            return cuda_ok(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, probe.stream()), "copying");
        }));
        out.push_back(best_of("copy bandwidth", "GB/s", device, t, 2.0 * static_cast<double>(bytes) / 1e9));
    }
    {
        const int n = quick ? 1024 : 8192;
        const size_t bytes = static_cast<size_t>(n) * n * 2;
        DeviceMemory a, b, c;
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMalloc(&a.p, bytes), "allocating a GEMM operand"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMalloc(&b.p, bytes), "allocating a GEMM operand"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMalloc(&c.p, bytes), "allocating the GEMM result"));
        // Bytes 0x3c: every bf16 operand is 0x3c3c (about 0.0115), finite (the rate does not depend on the values).
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMemsetAsync(a.p, 0x3c, bytes, probe.stream()), "filling an operand"));
        SIEVE_RETURN_IF_ERROR(cuda_ok(cudaMemsetAsync(b.p, 0x3c, bytes, probe.stream()), "filling an operand"));
        const float alpha = 1.0f, beta = 0.0f;
        SIEVE_ASSIGN_OR_RETURN(auto t, probe.time(reps, [&] {
            return cublas_ok(cublasGemmEx(probe.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.p, CUDA_R_16BF, n,
                                          b.p, CUDA_R_16BF, n, &beta, c.p, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT),
                             "bf16 GEMM");
        }));
        out.push_back(best_of("bf16 GEMM", "TFLOP/s", device, t, 2.0 * n * static_cast<double>(n) * n / 1e12));
    }
    SIEVE_RETURN_IF_ERROR(cuda_ok(cudaStreamSynchronize(probe.stream()), "finishing"));
    return out;
}

}  // namespace sieve::bench

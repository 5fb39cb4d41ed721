// The cuda backend (cuda_backend.h): device memory and one stream per backend, validation of every op's
// params (shapes only: index arrays live on the device, so check_indices cannot run here), and dispatch
// to the kernels of cuda_kernels.h.
#include <array>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_status.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve {

namespace {

constexpr int kMaxDevices = 16;

// One Device per GPU index, alive for the process: buffers point at it (device_buffer.h).
const Device& cuda_device(int index) {
    static const std::array<std::string, kMaxDevices> names = [] {
        std::array<std::string, kMaxDevices> n;
        for (int i = 0; i < kMaxDevices; ++i) n[static_cast<size_t>(i)] = fmt::format("cuda:{}", i);
        return n;
    }();
    static const std::array<Device, kMaxDevices> devices = [] {
        std::array<Device, kMaxDevices> d{};
        for (int i = 0; i < kMaxDevices; ++i) d[static_cast<size_t>(i)] = Device{names[static_cast<size_t>(i)], false};
        return d;
    }();
    return devices[static_cast<size_t>(index)];
}

// Makes `device` current for the calling thread: every runtime call below acts on the backend's GPU.
Status use_device(int device) { return cuda::cuda_status(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device)); }

class CudaBuffer final : public DeviceBuffer {
public:
    CudaBuffer(void* data, size_t bytes, BufferUsage usage, int device, bool owned)
        : DeviceBuffer(data, bytes, usage, cuda_device(device)), device_(device), owned_(owned) {}
    ~CudaBuffer() override {
        if (!owned_ || data() == nullptr) return;
        // cudaFree waits for the device's work that may still read the buffer.
        if (use_device(device_).is_ok()) cudaFree(data());
    }

private:
    int device_;
    bool owned_;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, cudaStream_t stream, std::string name)
        : device_(device), stream_(stream), name_(std::move(name)) {}
    ~CudaBackend() override {
        if (use_device(device_).is_ok()) cudaStreamDestroy(stream_);
    }

    const std::string& name() const override { return name_; }
    const Device& device() const override { return cuda_device(device_); }

    Expected<std::unique_ptr<DeviceBuffer>> buffer_alloc(size_t bytes, BufferUsage usage,
                                                         std::string_view what) override {
        if (bytes == 0) return std::unique_ptr<DeviceBuffer>(new CudaBuffer(nullptr, 0, usage, device_, false));
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        void* p = nullptr;
        const Status alloc = cuda::cuda_status(cudaMalloc(&p, bytes),
                                               fmt::format("{}: {} bytes of {} memory", what, bytes, buffer_usage_name(usage)));
        if (!alloc.is_ok()) return alloc;
        auto buffer = std::unique_ptr<DeviceBuffer>(new CudaBuffer(p, bytes, usage, device_, true));
        // Zeroed, in stream order: every later op and transfer of this backend sees the zeros.
        SIEVE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, bytes, stream_), fmt::format("{}: zeroing", what));
        return buffer;
    }
    Expected<std::unique_ptr<DeviceBuffer>> buffer_wrap(void* data, size_t bytes, BufferUsage usage,
                                                        std::string_view what) override {
        if (bytes == 0) return std::unique_ptr<DeviceBuffer>(new CudaBuffer(nullptr, 0, usage, device_, false));
        if (reinterpret_cast<uintptr_t>(data) % kBufferAlignment != 0)
            return invalid_argument_error("{}: {} is not {}-byte aligned", what, data, kBufferAlignment);
        cudaPointerAttributes attributes{};
        SIEVE_CUDA_RETURN_IF_ERROR(cudaPointerGetAttributes(&attributes, data), fmt::format("{}: {}", what, data));
        if (attributes.type != cudaMemoryTypeDevice || attributes.device != device_)
            return invalid_argument_error("{}: {} is not device memory of {}", what, data, name_);
        return std::unique_ptr<DeviceBuffer>(new CudaBuffer(data, bytes, usage, device_, false));
    }
    Status synchronize() override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::cuda_status(cudaStreamSynchronize(stream_), fmt::format("{}: synchronize", name_));
    }

    // ---- linear: not yet on this device ----
    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        SIEVE_RETURN_IF_ERROR(validate(w));
        return not_yet("linear");
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear&, const LinearParams&) override { return not_yet("linear"); }
    Status linear(const PreparedLinear&, const LinearPlan&, const LinearParams&, Workspace) override {
        return not_yet("linear");
    }

    // ---- row-wise ops ----
    Status rms_norm(const RmsNormParams& p) override { return run(p, [&] { return cuda::rms_norm(p, stream_); }); }
    Status layer_norm(const LayerNormParams& p) override {
        return run(p, [&] { return cuda::layer_norm(p, stream_); });
    }
    Status rope(const RopeParams& p) override { return checked_not_yet(p, "rope"); }
    Status quant_fp8(const QuantFp8Params& p) override { return checked_not_yet(p, "quant_fp8"); }
    Status hadamard(const HadamardParams& p) override { return checked_not_yet(p, "hadamard"); }

    Status cache_store(const CacheStoreParams& p) override { return checked_not_yet(p, "cache_store"); }

    size_t indexer_scores_workspace_size(const IndexerScoresParams&) const override { return 0; }
    Status indexer_scores(const IndexerScoresParams& p, Workspace) override { return checked_not_yet(p, "indexer_scores"); }
    Status selected_slots(const SelectedSlotsParams& p) override { return checked_not_yet(p, "selected_slots"); }
    size_t topk_workspace_size(const TopkParams&) const override { return 0; }
    Status topk(const TopkParams& p, Workspace) override { return checked_not_yet(p, "topk"); }

    size_t sparse_attention_workspace_size(const SparseAttentionParams&) const override { return 0; }
    Status sparse_attention(const SparseAttentionParams& p, Workspace) override {
        return checked_not_yet(p, "sparse_attention");
    }
    Status dsa_output_gate(const DsaOutputGateParams& p) override { return checked_not_yet(p, "dsa_output_gate"); }
    size_t mla_head_proj_workspace_size(const MlaHeadProjParams&) const override { return 0; }
    Status mla_head_proj(const MlaHeadProjParams& p, Workspace) override { return checked_not_yet(p, "mla_head_proj"); }

    Status kv_load(const KvLoadParams& p) override { return checked_not_yet(p, "kv_load"); }
    Status compressor_state_store(const CompressorStateStoreParams& p) override {
        return checked_not_yet(p, "compressor_state_store");
    }
    Status compressor_pool(const CompressorPoolParams& p) override { return checked_not_yet(p, "compressor_pool"); }

    Status qsa_pool(const QsaPoolParams& p) override { return checked_not_yet(p, "qsa_pool"); }
    Status qsa_expand(const QsaExpandParams& p) override { return checked_not_yet(p, "qsa_expand"); }
    size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams&) const override { return 0; }
    Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace) override { return checked_not_yet(p, "qsa_sparse_gqa"); }

protected:
    Status transfer_bytes(Transfer kind, void* dst, const void* src, size_t n) override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        const cudaMemcpyKind direction = kind == Transfer::host_to_device   ? cudaMemcpyHostToDevice
                                         : kind == Transfer::device_to_host ? cudaMemcpyDeviceToHost
                                                                            : cudaMemcpyDeviceToDevice;
        SIEVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, direction, stream_), fmt::format("{}: copy of {} bytes", name_, n));
        // The host side of an upload may be reused, and a download read, once the call returns (backend.h).
        if (kind == Transfer::device_to_device) return Status::ok();
        return cuda::cuda_status(cudaStreamSynchronize(stream_), fmt::format("{}: copy of {} bytes", name_, n));
    }
    Status fill_bytes(void* dst, uint8_t value, size_t n) override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::cuda_status(cudaMemsetAsync(dst, value, n, stream_), fmt::format("{}: fill of {} bytes", name_, n));
    }

private:
    template <class P, class F>
    Status run(const P& p, F&& launch) {
        SIEVE_RETURN_IF_ERROR(validate(p));
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return launch();
    }
    Status not_yet(std::string_view op) const {
        return unsupported_error("{}: {} has no CUDA kernel yet", name_, op);
    }
    // Invalid params are invalid_argument on every backend, before the missing kernel is reported.
    template <class P>
    Status checked_not_yet(const P& p, std::string_view op) const {
        SIEVE_RETURN_IF_ERROR(validate(p));
        return not_yet(op);
    }

    int device_;
    cudaStream_t stream_;
    std::string name_;
};

}  // namespace

std::vector<std::string> cuda_device_variants() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // no driver or no GPU: clear the error, list nothing
        return {};
    }
    std::vector<std::string> out;
    for (int i = 0; i < n && i < kMaxDevices; ++i) out.push_back(fmt::format("cuda:{}", i));
    return out;
}

Expected<std::unique_ptr<Backend>> make_cuda_backend(int device) {
    int n = 0;
    SIEVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n), "counting the GPUs");
    if (device >= n || device >= kMaxDevices)
        return unsupported_error("backend 'cuda:{}': this machine has {} CUDA device(s)", device, n);
    cudaDeviceProp prop{};
    SIEVE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), fmt::format("properties of cuda:{}", device));
    // The kernels are built for sm_90a only (CMakeLists.txt): an older or newer GPU has no image to run.
    if (prop.major != 9 || prop.minor != 0)
        return unsupported_error("backend 'cuda:{}': {} is sm_{}{}; this build's kernels are for sm_90a (Hopper)",
                                 device, prop.name, prop.major, prop.minor);
    SIEVE_RETURN_IF_ERROR(use_device(device));
    cudaStream_t stream = nullptr;
    SIEVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
    return std::unique_ptr<Backend>(new CudaBackend(device, stream, fmt::format("cuda:{}", device)));
}

}  // namespace sieve

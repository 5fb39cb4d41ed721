// The cuda backend (cuda_backend.h): device memory and one stream per backend, validation of every op's
// params (shapes only: index arrays live on the device, so check_indices cannot run here), and dispatch
// to the kernels of cuda_kernels.h.
#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/attention_kernels.h"
#include "backends/cuda/cache_kernels.h"
#include "backends/cuda/cuda_linear.h"
#include "backends/cuda/norm_kernels.h"
#include "backends/cuda/row_kernels.h"
#include "backends/cuda/selection_kernels.h"
#include "backends/cuda/cuda_status.h"

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

// Two CUDA events on the backend's stream: the device's own time between them (cudaEventElapsedTime,
// about 0.5 µs resolution).
class CudaStreamTimer final : public StreamTimer {
public:
    CudaStreamTimer(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
    ~CudaStreamTimer() override {
        if (!use_device(device_).is_ok()) return;
        if (start_ != nullptr) cudaEventDestroy(start_);
        if (stop_ != nullptr) cudaEventDestroy(stop_);
    }
    Status init() {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        SIEVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_), "stream timer: creating an event");
        return cuda::cuda_status(cudaEventCreate(&stop_), "stream timer: creating an event");
    }
    Status start() override { return record(start_); }
    Status stop() override { return record(stop_); }
    Expected<double> seconds() override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        SIEVE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_), "stream timer: waiting for the stop mark");
        float ms = 0.0f;
        SIEVE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_), "stream timer: elapsed time");
        return static_cast<double>(ms) * 1e-3;
    }

private:
    Status record(cudaEvent_t event) {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::cuda_status(cudaEventRecord(event, stream_), "stream timer: recording an event");
    }
    int device_;
    cudaStream_t stream_;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// A CUDA graph of work recorded on a backend's stream, instantiated once, launched on that stream.
class CudaStreamGraph final : public StreamGraph {
public:
    CudaStreamGraph(int device, cudaStream_t stream, cudaGraph_t graph, cudaGraphExec_t exec)
        : device_(device), stream_(stream), graph_(graph), exec_(exec) {}
    ~CudaStreamGraph() override {
        if (!use_device(device_).is_ok()) return;
        cudaGraphExecDestroy(exec_);
        cudaGraphDestroy(graph_);
    }
    Status replay() override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::cuda_status(cudaGraphLaunch(exec_, stream_), "replaying a captured graph");
    }

private:
    int device_;
    cudaStream_t stream_;
    cudaGraph_t graph_;
    cudaGraphExec_t exec_;
};

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, cudaStream_t stream, std::string name)
        : device_(device), stream_(stream), name_(std::move(name)) {}
    ~CudaBackend() override {
        if (!use_device(device_).is_ok()) return;
        if (cublas_ != nullptr) cublasDestroy(cublas_);
        cublas_workspace_.reset();
        cudaStreamDestroy(stream_);
    }

    // cuBLAS on the backend's stream with a workspace of its own, given once: cuBLAS then allocates nothing
    // during a GEMM, which a captured CUDA graph requires.
    Status init_cublas() {
        SIEVE_RETURN_IF_ERROR(cuda::cublas_status(cublasCreate(&cublas_), "creating a handle"));
        SIEVE_RETURN_IF_ERROR(cuda::cublas_status(cublasSetStream(cublas_, stream_), "setting the stream"));
        SIEVE_ASSIGN_OR_RETURN(cublas_workspace_, buffer_alloc(kCublasWorkspaceBytes, BufferUsage::workspace, "cuBLAS's workspace"));
        return cuda::cublas_status(cublasSetWorkspace(cublas_, cublas_workspace_->data(), kCublasWorkspaceBytes),
                                   "setting the workspace");
    }

    const std::string& name() const override { return name_; }
    size_t prepared_weight_bytes() const override { return cuda::cuda_live_weight_bytes(); }
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
    Expected<std::unique_ptr<StreamTimer>> stream_timer() override {
        auto timer = std::make_unique<CudaStreamTimer>(device_, stream_);
        SIEVE_RETURN_IF_ERROR(timer->init());
        return std::unique_ptr<StreamTimer>(std::move(timer));
    }

    // Stream capture in thread-local mode: a call of this thread that could wait for the device or allocate
    // (cudaMalloc, a synchronous copy, a synchronize) fails inside `enqueue` and invalidates the capture,
    // which then ends and reports it; no partial graph is kept.
    Expected<std::unique_ptr<StreamGraph>> capture(const std::function<Status()>& enqueue) override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        SIEVE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                   fmt::format("{}: beginning a capture", name_));
        const Status enqueued = enqueue();
        cudaGraph_t graph = nullptr;
        const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
        if (!enqueued.is_ok() || ended != cudaSuccess) {
            if (graph != nullptr) cudaGraphDestroy(graph);
            if (!enqueued.is_ok()) return enqueued.with_context(fmt::format("{}: capturing the stream", name_));
            return cuda::cuda_status(ended, fmt::format("{}: capture: the stream's work could not be recorded (a call "
                                                        "in it waited for the device, allocated or read back)",
                                                        name_));
        }
        cudaGraphExec_t exec = nullptr;
        const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
        if (made != cudaSuccess) {
            cudaGraphDestroy(graph);
            return cuda::cuda_status(made, fmt::format("{}: instantiating the captured graph", name_));
        }
        return std::unique_ptr<StreamGraph>(new CudaStreamGraph(device_, stream_, graph, exec));
    }

    // ---- linear (cuda_linear.h) ----
    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::linear_prepare(*this, w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        SIEVE_ASSIGN_OR_RETURN(const cuda::CudaPreparedLinear* prepared, own(w));
        return cuda::linear_plan(*prepared, shape);
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace ws) override {
        SIEVE_ASSIGN_OR_RETURN(const cuda::CudaPreparedLinear* prepared, own(w));
        SIEVE_RETURN_IF_ERROR(use_device(device_));
        return cuda::linear_run(cublas_, stream_, *prepared, plan, p, ws);
    }

    // ---- row-wise ops ----
    Status rms_norm(const RmsNormParams& p) override { return run(p, [&] { return cuda::rms_norm(p, stream_); }); }
    Status layer_norm(const LayerNormParams& p) override {
        return run(p, [&] { return cuda::layer_norm(p, stream_); });
    }
    Status rope(const RopeParams& p) override { return run(p, [&] { return cuda::rope(p, stream_); }); }
    Status quant_fp8(const QuantFp8Params& p) override { return run(p, [&] { return cuda::quant_fp8(p, stream_); }); }
    Status hadamard(const HadamardParams& p) override { return run(p, [&] { return cuda::hadamard(p, stream_); }); }

    // ---- caches, DeepSeek-V4's cache reads and compressor ----
    Status cache_store(const CacheStoreParams& p) override {
        return run(p, [&] { return cuda::cache_store(p, stream_); });
    }
    Status kv_load(const KvLoadParams& p) override { return run(p, [&] { return cuda::kv_load(p, stream_); }); }
    Status compressor_state_store(const CompressorStateStoreParams& p) override {
        return run(p, [&] { return cuda::compressor_state_store(p, stream_); });
    }
    Status compressor_pool(const CompressorPoolParams& p) override {
        return run(p, [&] { return cuda::compressor_pool(p, stream_); });
    }

    // ---- selection ----
    size_t indexer_scores_workspace_size(const IndexerScoresParams& p) const override {
        return cuda::indexer_scores_workspace_size(p);
    }
    Status indexer_scores(const IndexerScoresParams& p, Workspace ws) override {
        return run(p, [&] { return checked_workspace("indexer_scores", ws, cuda::indexer_scores_workspace_size(p),
                                                      [&] { return cuda::indexer_scores(p, ws, stream_); }); });
    }
    Status selected_slots(const SelectedSlotsParams& p) override {
        return run(p, [&] { return cuda::selected_slots(p, stream_); });
    }
    size_t topk_workspace_size(const TopkParams& p) const override { return cuda::topk_workspace_size(p); }
    Status topk(const TopkParams& p, Workspace ws) override {
        return run(p, [&] { return checked_workspace("topk", ws, cuda::topk_workspace_size(p),
                                                      [&] { return cuda::topk(p, ws, stream_); }); });
    }

    // ---- attention ----
    size_t sparse_attention_workspace_size(const SparseAttentionParams& p) const override {
        return cuda::sparse_attention_workspace_size(p);
    }
    Status sparse_attention(const SparseAttentionParams& p, Workspace ws) override {
        return run(p, [&] { return checked_workspace("sparse_attention", ws, cuda::sparse_attention_workspace_size(p),
                                                      [&] { return cuda::sparse_attention(p, ws, stream_); }); });
    }
    Status dsa_output_gate(const DsaOutputGateParams& p) override {
        return run(p, [&] { return cuda::dsa_output_gate(p, stream_); });
    }
    size_t mla_head_proj_workspace_size(const MlaHeadProjParams& p) const override {
        return cuda::mla_head_proj_workspace_size(p);
    }
    Status mla_head_proj(const MlaHeadProjParams& p, Workspace ws) override {
        return run(p, [&] {
            if (cuda::mla_head_proj_takes_gemm(p)) return cuda::mla_head_proj_gemm(cublas_, p);
            return checked_workspace("mla_head_proj", ws, cuda::mla_head_proj_workspace_size(p),
                                     [&] { return cuda::mla_head_proj(p, ws, stream_); });
        });
    }
    Status qsa_pool(const QsaPoolParams& p) override { return run(p, [&] { return cuda::qsa_pool(p, stream_); }); }
    Status qsa_expand(const QsaExpandParams& p) override { return run(p, [&] { return cuda::qsa_expand(p, stream_); }); }
    size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p) const override {
        return cuda::qsa_sparse_gqa_workspace_size(p);
    }
    Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws) override {
        return run(p, [&] { return checked_workspace("qsa_sparse_gqa", ws, cuda::qsa_sparse_gqa_workspace_size(p),
                                                      [&] { return cuda::qsa_sparse_gqa(p, ws, stream_); }); });
    }

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
    Expected<const cuda::CudaPreparedLinear*> own(const PreparedLinear& w) const {
        const auto* prepared = dynamic_cast<const cuda::CudaPreparedLinear*>(&w);
        if (prepared == nullptr) return invalid_argument_error("{} linear: weights were prepared by another backend", name_);
        return prepared;
    }
    template <class F>
    Status checked_workspace(std::string_view op, Workspace ws, size_t needed, F&& launch) {
        SIEVE_RETURN_IF_ERROR(check_workspace(op, ws, needed));
        return launch();
    }

    static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper

    int device_;
    cudaStream_t stream_;
    std::string name_;
    cublasHandle_t cublas_ = nullptr;
    std::unique_ptr<DeviceBuffer> cublas_workspace_;
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
    auto backend = std::make_unique<CudaBackend>(device, stream, fmt::format("cuda:{}", device));
    SIEVE_RETURN_IF_ERROR(backend->init_cublas());
    return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace sieve

// The backend interface: one method per op (ggml style), implemented by ref/ (the scalar oracle),
// cpu/ (per-ISA kernels, threads, oneDNN) and host_copy/ (a checking device over either). Models and
// tests call ops only through this; backend.cpp registers every kind.
//
// Rules every implementation follows (DESIGN.md "Layers of the code"):
//   * Each method validates its params with the op contract's validate() (shapes only, never reading
//     memory) and returns that Status; a backend whose memory the host reads also runs check_indices()
//     (the index arrays' contents: ops/op_common.h validate_and_check_indices). A GPU backend cannot
//     without reading device memory back; its kernels treat an out-of-range entry as absent (skipped,
//     or −1 / NaN where the op writes one) and never touch memory outside the views. The cuda
//     backend's tensor-core sparse attention over fp8_v32 entries applies each group's fp32 scale to
//     sums instead of to every value, so a scale large enough to overflow its group (448 · s = inf, which
//     no quantizer writes) counts as NaN there (src/backends/cuda/attention_kernels.cu).
//   * A combination the backend does not implement (op, dtype, ISA) returns unsupported_error naming
//     it ("cpu:avx2: linear with ..."), never a silent fallback that changes numerics.
//   * Run methods allocate nothing. Scratch memory comes from the caller as a Workspace sized by the
//     matching *_workspace_size (or by a LinearPlan); too small a workspace is invalid_argument.
//     (Known exception: a linear plan whose kernel is oneDNN's matmul; oneDNN 2.x allocates a few small
//     blocks inside every primitive execution. tests/ops/no_alloc_test.cpp pins the count.)
//   * Weights are prepared once (linear_prepare) and planned per batch shape (linear_plan).
//   * The backend owns its memory and its stream: buffers come from buffer_alloc, bytes move only
//     through buffer_upload / buffer_download / buffer_copy / buffer_fill, and ops and transfers run
//     in the order they are issued. Host code never dereferences a buffer of a device that is not
//     host_accessible (backends/device_buffer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/backends/device_buffer.h"
#include "sieve/core/status.h"
#include "sieve/ops/linear.h"

namespace sieve {

// The params of every op (ops/<op>.h): a caller includes the contract of each op it calls, so that this
// interface does not make every user of a backend depend on every op.
struct CacheStoreParams;
struct CompressorPoolParams;
struct CompressorStateStoreParams;
struct DsaOutputGateParams;
struct HadamardParams;
struct IndexerScoresParams;
struct KvLoadParams;
struct LayerNormParams;
struct MlaHeadProjParams;
struct QsaExpandParams;
struct QsaPoolParams;
struct QsaSparseGqaParams;
struct QuantFp8Params;
struct RmsNormParams;
struct RopeParams;
struct SelectedSlotsParams;
struct SparseAttentionParams;
struct TopkParams;

// Caller-owned scratch memory for one op call. Backends need 64-byte alignment.
struct Workspace {
    void* data = nullptr;
    size_t bytes = 0;
};
inline constexpr size_t kWorkspaceAlignment = 64;
// `bytes` rounded up to kWorkspaceAlignment: the offsets of the sub-buffers a backend carves out of one
// workspace.
template <typename Int>
constexpr Int workspace_round_up(Int bytes) {
    constexpr Int a = static_cast<Int>(kWorkspaceAlignment);
    return (bytes + a - 1) / a * a;
}

// Weights of one linear layer after the backend's load-time preparation (packed, converted).
// Owned by the caller; usable only with the backend that made it.
class PreparedLinear {
public:
    virtual ~PreparedLinear() = default;
    int64_t out_features() const { return out_features_; }
    int64_t in_features() const { return in_features_; }  // the weight's columns: each group's x values
    int64_t groups() const { return groups_; }            // ops/linear.h "Groups"
    int64_t x_features() const { return groups_ * in_features_; }  // values of an x row
    LinearMath math() const { return math_; }
    DType weight_type() const { return weight_type_; }
    // Bytes held by the prepared weights (all packs).
    virtual size_t bytes() const = 0;
    // How the weights are held ("f32 panels", "fp8 panels + oneDNN bf16", ...): a numerics choice
    // made at prepare time that reports should show.
    virtual std::string describe() const = 0;

protected:
    PreparedLinear(int64_t out_features, int64_t in_features, LinearMath math, DType weight_type, int64_t groups = 1)
        : out_features_(out_features), in_features_(in_features), groups_(groups), math_(math), weight_type_(weight_type) {}

private:
    int64_t out_features_, in_features_, groups_;
    LinearMath math_;
    DType weight_type_;
};

// What linear_plan() decided for one batch shape (the LinearParams given to it, pointers ignored).
// linear() must then be called with params of exactly that shape, by one thread at a time per plan
// (a plan may hold backend objects that a run rebinds to the call's buffers). Backend methods must not
// be called from inside a ThreadPool task of the pool the backend uses (the pool is not reentrant).
struct LinearPlan {
    int64_t n_tokens = 0, x_row_stride = 0, y_row_stride = 0;
    DType x_type = DType::f32, y_type = DType::f32;
    size_t workspace_bytes = 0;
    std::string kernel;                 // what runs, e.g. "linear_fp8_avx512_bf16", "oneDNN matmul bf16 (avx512_core_bf16)"
    std::shared_ptr<const void> state;  // backend-specific (a oneDNN primitive, …); may be null

    // A plan of shape's batch shape (what check_linear_plan compares); the rest is the backend's to fill.
    static LinearPlan of_shape(const LinearParams& shape) {
        LinearPlan plan;
        plan.n_tokens = shape.n_tokens;
        plan.x_row_stride = shape.x_row_stride;
        plan.y_row_stride = shape.y_row_stride;
        plan.x_type = shape.x_type;
        plan.y_type = shape.y_type;
        return plan;
    }
};

// The checks every backend's linear() makes on its plan and workspace.
inline Status check_linear_plan(const LinearPlan& plan, const LinearParams& p) {
    if (plan.n_tokens != p.n_tokens || plan.x_row_stride != p.x_row_stride || plan.y_row_stride != p.y_row_stride ||
        plan.x_type != p.x_type || plan.y_type != p.y_type)
        return invalid_argument_error(
            "linear: params (n_tokens {}, x_row_stride {}, y_row_stride {}, x {}, y {}) differ from the plan's "
            "(n_tokens {}, x_row_stride {}, y_row_stride {}, x {}, y {})",
            p.n_tokens, p.x_row_stride, p.y_row_stride, dtype_name(p.x_type), dtype_name(p.y_type), plan.n_tokens,
            plan.x_row_stride, plan.y_row_stride, dtype_name(plan.x_type), dtype_name(plan.y_type));
    return Status::ok();
}
inline Status check_workspace(std::string_view op, Workspace ws, size_t needed) {
    if (needed == 0) return Status::ok();
    if (ws.bytes < needed)
        return invalid_argument_error("{}: workspace of {} bytes, needs {}", op, ws.bytes, needed);
    if (ws.data == nullptr || reinterpret_cast<uintptr_t>(ws.data) % kWorkspaceAlignment != 0)
        return invalid_argument_error("{}: workspace at {} is not {}-byte aligned", op, ws.data, kWorkspaceAlignment);
    return Status::ok();
}

// Device time between two marks in a backend's stream order (`sieve bench` on a GPU: the device's own
// time, without the host's launch gaps). A host backend runs each op before its call returns, so its
// marks are wall-clock instants (the default stream_timer()).
class StreamTimer {
public:
    virtual ~StreamTimer() = default;
    virtual Status start() = 0;  // marks the stream: work issued after it is timed
    virtual Status stop() = 0;   // marks the stream: work issued before it is timed
    // Seconds between the last start and stop marks; waits for the stop mark to be reached.
    virtual Expected<double> seconds() = 0;
};

// Work a backend's stream recorded instead of running it (Backend::capture), replayed as one unit: on a
// GPU a CUDA graph, one launch for a whole step's ops instead of one per op. A replay acts on the buffers
// the recorded calls named, with the values they hold when it runs.
class StreamGraph {
public:
    virtual ~StreamGraph() = default;
    // Enqueues the recorded work on the backend's stream, in order with the backend's other work.
    virtual Status replay() = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    // Canonical name, e.g. "ref", "cpu:avx512_bf16:auto".
    virtual const std::string& name() const = 0;

    // Bytes of the weights this kind of backend holds prepared (packs of live PreparedLinears, in the
    // whole process): what `sieve run` states as resident weights.
    virtual size_t prepared_weight_bytes() const { return 0; }

    // ---- device memory and stream (backends/device_buffer.h) ----
    virtual const Device& device() const = 0;
    bool host_accessible() const { return device().host_accessible; }
    // `bytes` zeroed bytes, kBufferAlignment-aligned; out_of_memory_error naming `what` when the device
    // has no room. 0 bytes gives an empty buffer.
    virtual Expected<std::unique_ptr<DeviceBuffer>> buffer_alloc(size_t bytes, BufferUsage usage,
                                                                 std::string_view what) = 0;
    // A buffer over `bytes` of memory the caller owns on this backend's device and keeps alive longer than
    // the buffer (an inference framework's tensor: its KV caches, for zero-copy use); the buffer never
    // frees it. `data` must be kBufferAlignment-aligned. unsupported_error where the device cannot take
    // foreign memory (the default).
    virtual Expected<std::unique_ptr<DeviceBuffer>> buffer_wrap(void* data, size_t bytes, BufferUsage usage,
                                                                std::string_view what);
    // Host → buffer. Returns once `src` may be reused.
    Status buffer_upload(DeviceBuffer& dst, size_t dst_offset, const void* src, size_t n);
    // Buffer → host, after every op issued before it. Returns once `dst` holds the bytes.
    Status buffer_download(const DeviceBuffer& src, size_t src_offset, void* dst, size_t n);
    // Buffer → buffer on the device, in stream order. The ranges must not overlap.
    Status buffer_copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t n);
    // Sets n bytes to `value`, in stream order.
    Status buffer_fill(DeviceBuffer& dst, size_t dst_offset, uint8_t value, size_t n);
    // Waits for every op and transfer issued so far; an error an op raised on the device surfaces here.
    virtual Status synchronize() = 0;
    // A timer on this backend's stream (StreamTimer above); the default measures wall-clock time.
    virtual Expected<std::unique_ptr<StreamTimer>> stream_timer();
    // Records the work `enqueue` issues on this backend's stream, without running it, for StreamGraph::replay.
    // `enqueue` may only enqueue: a call that waits for the device, allocates memory or reads results back
    // cannot be recorded, and capture returns its error (a layer step only enqueues once its plan is
    // uploaded and its workspaces have grown to the step's size: DESIGN.md). unsupported_error where the
    // backend has no stream to record (the default: a host backend runs each op inside its call).
    virtual Expected<std::unique_ptr<StreamGraph>> capture(const std::function<Status()>& enqueue);

    // ---- linear (ops/linear.h) ----
    virtual Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) = 0;
    virtual Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) = 0;
    virtual Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace ws) = 0;

    // ---- row-wise ops ----
    virtual Status rms_norm(const RmsNormParams& p) = 0;     // ops/rms_norm.h
    virtual Status layer_norm(const LayerNormParams& p) = 0; // ops/layer_norm.h
    virtual Status rope(const RopeParams& p) = 0;            // ops/rope.h
    virtual Status quant_fp8(const QuantFp8Params& p) = 0;   // ops/quant_fp8.h
    virtual Status hadamard(const HadamardParams& p) = 0;    // ops/hadamard.h

    // ---- caches: every family's cache writes (ops/cache_store.h) ----
    virtual Status cache_store(const CacheStoreParams& p) = 0;

    // ---- selection: the indexer's scores (with an optional fused top-k), top-k, top-k → slots ----
    virtual size_t indexer_scores_workspace_size(const IndexerScoresParams& p) const = 0;  // ops/indexer_scores.h
    virtual Status indexer_scores(const IndexerScoresParams& p, Workspace ws) = 0;
    virtual Status selected_slots(const SelectedSlotsParams& p) = 0;   // ops/selected_slots.h
    virtual size_t topk_workspace_size(const TopkParams& p) const = 0;  // ops/topk.h
    virtual Status topk(const TopkParams& p, Workspace ws) = 0;

    // ---- sparse attention: DeepSeek-V4's MQA and DSA's MLA (ops/sparse_attention.h) ----
    virtual size_t sparse_attention_workspace_size(const SparseAttentionParams& p) const = 0;
    virtual Status sparse_attention(const SparseAttentionParams& p, Workspace ws) = 0;

    // ---- DSA on MLA: output gate, per-head projection ----
    virtual Status dsa_output_gate(const DsaOutputGateParams& p) = 0;  // ops/dsa_output_gate.h
    virtual size_t mla_head_proj_workspace_size(const MlaHeadProjParams& p) const = 0;  // ops/mla_head_proj.h
    virtual Status mla_head_proj(const MlaHeadProjParams& p, Workspace ws) = 0;

    // ---- DeepSeek-V4: cache reads, compressor ----
    virtual Status kv_load(const KvLoadParams& p) = 0;  // ops/kv_load.h (every cache format)
    virtual Status compressor_state_store(const CompressorStateStoreParams& p) = 0;  // ops/compressor.h
    virtual Status compressor_pool(const CompressorPoolParams& p) = 0;               // ops/compressor.h

    // ---- QSA (ops/qsa_pool.h, qsa_expand.h, qsa_sparse_gqa.h) ----
    virtual Status qsa_pool(const QsaPoolParams& p) = 0;
    virtual Status qsa_expand(const QsaExpandParams& p) = 0;
    virtual size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p) const = 0;
    virtual Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws) = 0;

protected:
    // The device side of the buffer_* calls, after the public wrappers have checked that the buffers
    // belong to this backend's device and the ranges lie inside them (n > 0).
    enum class Transfer : uint8_t { host_to_device, device_to_host, device_to_device };
    virtual Status transfer_bytes(Transfer kind, void* dst, const void* src, size_t n) = 0;
    virtual Status fill_bytes(void* dst, uint8_t value, size_t n) = 0;
};

// A kind of backend (one device or oracle): how its specs are written and made. backend_kinds()
// lists every kind built in (backends/backend.cpp); the conformance tests run every variant of every
// kind against "ref".
struct BackendKind {
    std::string_view name;   // the spec's first part: "ref", "cpu"
    std::string_view specs;  // the specs it accepts, for errors and help text
    Expected<std::unique_ptr<Backend>> (*make)(std::string_view spec);
    // The specs of every variant this machine can run (none when the device is absent).
    std::vector<std::string> (*variants)();
};
std::span<const BackendKind> backend_kinds();
// Every kind's accepted specs, "; "-separated: the help text of a --backend flag.
std::string backend_specs_help();

// A backend from its spec: "ref", or a spec of the kind its first part names (cpu: see
// backends/cpu/cpu_backend.h). Errors: invalid_argument for a malformed or unknown name,
// unsupported for a variant this machine or build cannot run.
Expected<std::unique_ptr<Backend>> make_backend(std::string_view spec);

}  // namespace sieve

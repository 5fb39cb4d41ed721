// A weight tensor in the model's backend memory (DESIGN.md: caches, workspaces and every weight live in
// backend buffers): norms, sinks, compressor position biases, head matrices and RoPE tables are read
// from the checkpoint (or computed) on the host once, at load, and uploaded; ops get its device address.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/core/tensor.h"

namespace sieve {

class DeviceTensor {
public:
    DeviceTensor() = default;
    // `host`'s bytes, dtype and shape on `backend`; `what` names it in an out-of-memory error.
    static Expected<DeviceTensor> upload(Backend& backend, const Tensor& host, std::string_view what);
    // A rank-1 f32 tensor of `values` (a table computed at load, e.g. RoPE's inverse frequencies).
    static Expected<DeviceTensor> upload_f32(Backend& backend, std::span<const float> values, std::string_view what);

    bool empty() const { return numel_ == 0; }
    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int64_t dim(size_t i) const { return shape_.at(i); }
    int64_t numel() const { return numel_; }
    // The device address of element 0 (nullptr when empty): for op params only, never to dereference
    // on the host unless the backend is host_accessible.
    template <typename T>
    const T* as() const {
        return buffer_ ? buffer_->as<const T>() : nullptr;
    }
    const void* data() const { return buffer_ ? buffer_->data() : nullptr; }

private:
    std::unique_ptr<DeviceBuffer> buffer_;
    DType dtype_ = DType::f32;
    Shape shape_;
    int64_t numel_ = 0;
};

}  // namespace sieve

// Tensor (owning, 64-byte aligned, contiguous) and TensorView (pointer + dtype + shape + strides).
// Strides are in elements. Views never own memory; ops take raw pointers in their params structs,
// views are for the layers above (io, models, tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

using Shape = std::vector<int64_t>;

std::string shape_to_string(std::span<const int64_t> shape);  // "[4, 128]"
// Product of the dims; nullopt on a negative dim or an int64 overflow.
std::optional<int64_t> shape_numel(std::span<const int64_t> shape);
Shape contiguous_strides(std::span<const int64_t> shape);

struct TensorView {
    void* data = nullptr;
    DType dtype = DType::f32;
    Shape shape;
    Shape strides;  // elements

    int64_t dim(size_t i) const { return shape.at(i); }
    size_t rank() const { return shape.size(); }
    int64_t numel() const;
    bool is_contiguous() const;
    template <typename T>
    T* as() const {
        return static_cast<T*>(data);
    }
};

class Tensor {
public:
    static constexpr size_t kAlignment = 64;

    Tensor() = default;
    // Zero-filled. Returns out_of_memory or invalid_argument (bad shape) as a Status.
    static Expected<Tensor> zeros(DType dtype, Shape shape);
    // For callers whose shapes are known-good (tests, small fixed buffers): asserts instead.
    static Tensor zeros_or_die(DType dtype, Shape shape);

    void* data() { return data_.get(); }
    const void* data() const { return data_.get(); }
    template <typename T>
    T* as() {
        return static_cast<T*>(data());
    }
    template <typename T>
    const T* as() const {
        return static_cast<const T*>(data());
    }
    DType dtype() const { return dtype_; }
    const Shape& shape() const { return shape_; }
    int64_t dim(size_t i) const { return shape_.at(i); }
    size_t rank() const { return shape_.size(); }
    int64_t numel() const { return numel_; }
    size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
    TensorView view() const;

private:
    struct FreeAligned {
        void operator()(void* p) const;
    };
    std::unique_ptr<void, FreeAligned> data_;
    DType dtype_ = DType::f32;
    Shape shape_;
    int64_t numel_ = 0;
};

}  // namespace sieve

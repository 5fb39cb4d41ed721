#include "sieve/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/assert.h"

namespace sieve {

std::string shape_to_string(std::span<const int64_t> shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::optional<int64_t> shape_numel(std::span<const int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
        n *= d;
    }
    return n;
}

Shape contiguous_strides(std::span<const int64_t> shape) {
    Shape strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s *= shape[i];
    }
    return strides;
}

int64_t TensorView::numel() const { return shape_numel(shape).value_or(0); }

bool TensorView::is_contiguous() const { return strides == contiguous_strides(shape); }

void Tensor::FreeAligned::operator()(void* p) const { std::free(p); }

Expected<Tensor> Tensor::zeros(DType dtype, Shape shape) {
    const auto numel = shape_numel(shape);
    if (!numel) return invalid_argument_error("tensor shape {} is negative or overflows", shape_to_string(shape));
    const size_t elem = dtype_size(dtype);
    // 2^46 bytes (64 TiB) is beyond any host this runs on; refusing it up front gives a clear
    // error instead of an allocator abort (sanitizers abort on absurd sizes).
    constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 46;
    if (static_cast<uint64_t>(*numel) > kMaxTensorBytes / elem)
        return out_of_memory_error("tensor of shape {} ({}) is too large", shape_to_string(shape), dtype_name(dtype));
    size_t bytes = static_cast<size_t>(*numel) * elem;
    bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;  // aligned_alloc needs a multiple
    if (bytes == 0) bytes = kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (!p) return out_of_memory_error("cannot allocate {} bytes for a tensor of shape {}", bytes, shape_to_string(shape));
    std::memset(p, 0, bytes);
    Tensor t;
    t.data_.reset(p);
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.numel_ = *numel;
    return t;
}

Tensor Tensor::zeros_or_die(DType dtype, Shape shape) {
    auto t = zeros(dtype, std::move(shape));
    SIEVE_ASSERT(t.has_value(), "Tensor::zeros_or_die failed");
    return std::move(t).value();
}

TensorView Tensor::view() const {
    return TensorView{const_cast<void*>(data()), dtype_, shape_, contiguous_strides(shape_)};
}

}  // namespace sieve

// A tensor argument of an op binding: a zero-copy DLPack view of the caller's tensor (torch, or any
// DLPack producer) with its name, so that every check can say which argument is wrong and how
// ("sieve.ops.rope: x: dtype float16, expected float32 or bfloat16").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "sieve/core/dtype.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve::python {

using Array = nanobind::ndarray<>;

class TensorArg {
public:
    // `op`: the Python name of the op, for messages. Throws InvalidArgumentError for a dtype sieve has
    // no name for.
    TensorArg(const char* op, const char* name, const Array& array);

    DType dtype() const { return dtype_; }
    int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
    int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
    int64_t stride(int64_t i) const { return strides_[static_cast<size_t>(i)]; }  // elements
    int64_t numel() const;
    const std::vector<int64_t>& shape() const { return shape_; }
    void* data() const { return data_; }
    const std::string& name() const { return name_; }

    // Checks, each throwing InvalidArgumentError that names the op, the argument and what was expected.
    const TensorArg& expect_dtype(std::initializer_list<DType> allowed) const;
    // `dims`: the expected size of each dimension, -1 for any; `names` names them for the message.
    const TensorArg& expect_shape(std::initializer_list<int64_t> dims, const char* names) const;
    // The last dimension is contiguous (stride 1), as every op contract reads rows.
    const TensorArg& expect_rows_contiguous() const;
    // Every dimension is contiguous (row-major, no gaps).
    const TensorArg& expect_contiguous() const;

    // The tensor's device, checked to be one this build runs on (the CPU; a CUDA tensor is
    // UnsupportedError until the CUDA backend exists).
    void expect_host() const;

    // Throws InvalidArgumentError "sieve.ops.<op>: <name>: <what>".
    [[noreturn]] void fail(const std::string& what) const;

private:
    std::string op_, name_;
    DType dtype_ = DType::f32;
    std::vector<int64_t> shape_, strides_;
    void* data_ = nullptr;
    int32_t device_type_ = 0, device_id_ = 0;
};

// "[2, 64, 512]"
std::string shape_string(const std::vector<int64_t>& shape);


// A paged cache tensor as the ops see it (ops/cache_view.h): dimension 0 counts the blocks, stride(0)
// is the block stride (it may be larger than a block's bytes: vLLM interleaves the pages of several
// layers in one block), and the rest of each block is contiguous and holds block_size entries of
// `layout`. Any dtype (uint8 for the fp8 records; float32 / bfloat16 for the plain ones).
// The blocks of such a tensor, checked (host, [num_blocks ≥ 1, ...], the dimensions after the first
// contiguous, blocks not overlapping): what both the ops' caches and an engine's bound caches are.
struct CacheBlocks {
    int64_t n_blocks = 0;
    int64_t stride_bytes = 0;  // block stride
    int64_t bytes = 0;         // bytes of one block's own dimensions
    int64_t extent_bytes() const { return (n_blocks - 1) * stride_bytes + bytes; }  // base to the last block's end
};
CacheBlocks cache_blocks(const TensorArg& cache);

struct PagedCache {
    CacheView view;
    int64_t n_blocks = 0;
    int64_t n_slots() const { return n_blocks * view.block_size; }
};
PagedCache paged_cache(const TensorArg& cache, int64_t block_size, const CacheRecordLayout& layout);

// "f32" | "bf16" | "fp8_row_scale" | "fp8_model1" | "fp8_v32" (ops/cache_record.h); `op` for the message.
CacheRecordFormat parse_cache_format(const char* op, const std::string& name);

}  // namespace sieve::python

#include "tensor_arg.h"

#include <fmt/format.h>

#include "errors.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

// DLPack's (code, bits) of each dtype sieve names (dlpack.h DLDataTypeCode).
bool dtype_from_dlpack(nb::dlpack::dtype t, DType& out) {
    using Code = nb::dlpack::dtype_code;
    if (t.lanes != 1) return false;
    const auto code = static_cast<Code>(t.code);
    struct Entry {
        Code code;
        uint8_t bits;
        DType dtype;
    };
    static constexpr Entry table[] = {
        {Code::Float, 64, DType::f64},         {Code::Float, 32, DType::f32},
        {Code::Float, 16, DType::f16},         {Code::Bfloat, 16, DType::bf16},
        {Code::Float8_E4M3FN, 8, DType::f8_e4m3}, {Code::Float8_E5M2, 8, DType::f8_e5m2},
        {Code::Float8_E8M0FNU, 8, DType::f8_e8m0}, {Code::Int, 64, DType::i64},
        {Code::Int, 32, DType::i32},           {Code::Int, 16, DType::i16},
        {Code::Int, 8, DType::i8},             {Code::UInt, 64, DType::u64},
        {Code::UInt, 32, DType::u32},          {Code::UInt, 16, DType::u16},
        {Code::UInt, 8, DType::u8},            {Code::Bool, 8, DType::boolean},
    };
    for (const Entry& e : table)
        if (e.code == code && e.bits == t.bits) {
            out = e.dtype;
            return true;
        }
    return false;
}

const char* device_name(int32_t type) {
    switch (type) {
        case nb::device::cpu::value: return "cpu";
        case nb::device::cuda::value: return "cuda";
        case nb::device::cuda_host::value: return "cuda_host";
        case nb::device::rocm::value: return "rocm";
        case nb::device::metal::value: return "mps";
        default: return "an unknown device";
    }
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

TensorArg::TensorArg(const char* op, const char* name, const Array& array) : op_(op), name_(name) {
    if (!dtype_from_dlpack(array.dtype(), dtype_))
        fail(fmt::format("DLPack dtype (code {}, bits {}, lanes {}) has no sieve name", array.dtype().code,
                         array.dtype().bits, array.dtype().lanes));
    for (size_t i = 0; i < array.ndim(); ++i) {
        shape_.push_back(static_cast<int64_t>(array.shape(i)));
        strides_.push_back(static_cast<int64_t>(array.stride(i)));
    }
    data_ = array.data();
    device_type_ = array.device_type();
    device_id_ = array.device_id();
}

int64_t TensorArg::numel() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return n;
}

void TensorArg::fail(const std::string& what) const {
    throw StatusError(invalid_argument_error("sieve.ops.{}: {}: {}", op_, name_, what));
}

const TensorArg& TensorArg::expect_dtype(std::initializer_list<DType> allowed) const {
    for (DType d : allowed)
        if (d == dtype_) return *this;
    std::vector<std::string_view> names;
    for (DType d : allowed) names.push_back(dtype_name(d));
    fail(fmt::format("dtype {}, expected {}", dtype_name(dtype_), fmt::join(names, " or ")));
}

const TensorArg& TensorArg::expect_shape(std::initializer_list<int64_t> dims, const char* names) const {
    bool ok = dims.size() == shape_.size();
    size_t i = 0;
    for (int64_t d : dims) {
        if (ok && d >= 0 && shape_[i] != d) ok = false;
        ++i;
    }
    if (!ok) {
        std::vector<std::string> expected;
        for (int64_t d : dims) expected.push_back(d >= 0 ? std::to_string(d) : std::string("*"));
        fail(fmt::format("shape {}, expected [{}] ({})", shape_string(shape_), fmt::join(expected, ", "), names));
    }
    return *this;
}

const TensorArg& TensorArg::expect_rows_contiguous() const {
    if (!shape_.empty() && shape_.back() > 1 && strides_.back() != 1)
        fail(fmt::format("the last dimension has stride {}, expected 1 (make it .contiguous())", strides_.back()));
    return *this;
}

const TensorArg& TensorArg::expect_contiguous() const {
    int64_t expected = 1;
    for (size_t i = shape_.size(); i-- > 0;) {
        if (shape_[i] > 1 && strides_[i] != expected)
            fail(fmt::format("strides [{}] are not contiguous for shape {} (make it .contiguous())",
                             fmt::join(strides_, ", "), shape_string(shape_)));
        expected *= shape_[i];
    }
    return *this;
}

void TensorArg::expect_host() const {
    if (device_type_ == nb::device::cpu::value) return;
    if (device_type_ == nb::device::cuda::value)
        throw StatusError(unsupported_error(
            "sieve.ops.{}: {} is on cuda:{}; this build of sieve runs on the CPU only (no CUDA backend yet)", op_,
            name_, device_id_));
    throw StatusError(unsupported_error("sieve.ops.{}: {} is on {} (device type {}); sieve runs on the CPU", op_,
                                        name_, device_name(device_type_), device_type_));
}


CacheBlocks cache_blocks(const TensorArg& cache) {
    cache.expect_host();
    if (cache.rank() < 2 || cache.dim(0) < 1)
        cache.fail(fmt::format("shape {}, expected [num_blocks ≥ 1, ...] (one block per row)", shape_string(cache.shape())));
    const int64_t item = static_cast<int64_t>(dtype_size(cache.dtype()));
    // The block's own dimensions must be contiguous: entries are addressed by byte offsets inside it.
    int64_t block_elems = 1;
    for (int64_t i = cache.rank() - 1; i >= 1; --i) {
        if (cache.dim(i) > 1 && cache.stride(i) != block_elems)
            cache.fail("the dimensions after the first (one block) must be contiguous");
        block_elems *= cache.dim(i);
    }
    if (cache.dim(0) > 1 && cache.stride(0) < block_elems)
        cache.fail(fmt::format("block stride {} overlaps the blocks of {} elements", cache.stride(0), block_elems));
    CacheBlocks b;
    b.n_blocks = cache.dim(0);
    b.bytes = block_elems * item;
    b.stride_bytes = cache.dim(0) > 1 ? cache.stride(0) * item : b.bytes;
    return b;
}

PagedCache paged_cache(const TensorArg& cache, int64_t block_size, const CacheRecordLayout& layout) {
    const CacheBlocks blocks = cache_blocks(cache);
    PagedCache out;
    out.n_blocks = blocks.n_blocks;
    out.view.base = static_cast<uint8_t*>(cache.data());
    out.view.block_size = block_size;
    out.view.entry_bytes = layout.entry_bytes();
    out.view.block_bytes = blocks.stride_bytes;
    if (block_size < 1 || blocks.bytes < block_size * out.view.entry_bytes)
        cache.fail(fmt::format("a block holds {} bytes, but block_size {} entries of {} ({} values) take {} bytes each",
                               blocks.bytes, block_size, cache_record_format_name(layout.format), layout.dim,
                               out.view.entry_bytes));
    return out;
}

CacheRecordFormat parse_cache_format(const char* op, const std::string& name) {
    for (CacheRecordFormat f : {CacheRecordFormat::f32, CacheRecordFormat::bf16, CacheRecordFormat::fp8_row_scale,
                                CacheRecordFormat::fp8_model1, CacheRecordFormat::fp8_v32})
        if (cache_record_format_name(f) == name) return f;
    throw StatusError(invalid_argument_error(
        "sieve.ops.{}: cache format '{}', expected f32, bf16, fp8_row_scale, fp8_model1 or fp8_v32", op, name));
}

}  // namespace sieve::python

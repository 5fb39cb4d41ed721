#include "models/device_tensor.h"

namespace sieve {

Expected<DeviceTensor> DeviceTensor::upload(Backend& backend, const Tensor& host, std::string_view what) {
    DeviceTensor t;
    t.dtype_ = host.dtype();
    t.shape_ = host.shape();
    t.numel_ = host.numel();
    if (t.numel_ == 0) return t;
    SIEVE_ASSIGN_OR_RETURN(t.buffer_, backend.buffer_alloc(host.nbytes(), BufferUsage::weights, what));
    SIEVE_RETURN_IF_ERROR(backend.buffer_upload(*t.buffer_, 0, host.data(), host.nbytes()));
    return t;
}

Expected<DeviceTensor> DeviceTensor::upload_f32(Backend& backend, std::span<const float> values,
                                                std::string_view what) {
    if (values.empty()) return DeviceTensor{};
    SIEVE_ASSIGN_OR_RETURN(Tensor host, Tensor::zeros(DType::f32, {static_cast<int64_t>(values.size())}));
    std::copy(values.begin(), values.end(), host.as<float>());
    return upload(backend, host, what);
}

}  // namespace sieve

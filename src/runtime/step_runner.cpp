#include "sieve/runtime/step_runner.h"

#include <fmt/format.h>

#include <utility>

namespace sieve {

Status StepRunner::run(const StepBatch& batch, StepIo& io, bool chain, StageTimes* times, LayerHook* hook) {
    const int64_t hidden = model_.hidden_size();
    const size_t n = static_cast<size_t>(batch.n_tokens() * hidden);
    const size_t bytes = n * sizeof(float);
    Backend& backend = model_.backend();
    for (auto& buffer : activations_) {
        if (buffer && buffer->bytes() >= bytes) continue;
        buffer.reset();
        SIEVE_ASSIGN_OR_RETURN(buffer, backend.buffer_alloc(bytes, BufferUsage::workspace, "the step's activations"));
    }
    host_rows_.resize(n);
    const std::span<float> rows(host_rows_);

    SIEVE_RETURN_IF_ERROR(model_.plan_step(batch));
    const std::vector<int64_t> layers = model_.layers();
    DeviceBuffer* in = activations_[0].get();
    DeviceBuffer* out = activations_[1].get();
    for (size_t l = 0; l < layers.size(); ++l) {
        const auto pos = static_cast<int64_t>(l);
        Status s;
        if (l == 0 || !chain) {
            io.input(pos, rows);
            s = backend.buffer_upload(*in, 0, rows.data(), bytes);
        }
        if (s.is_ok()) {
            if (hook) hook->before_layer(pos);
            s = model_.forward(pos, batch, in->as<float>(), out->as<float>(), times);
            if (s.is_ok() && hook) s = backend.synchronize();
            if (s.is_ok() && hook) hook->after_layer(pos);
        }
        if (s.is_ok()) s = backend.buffer_download(*out, 0, rows.data(), bytes);
        if (!s.is_ok()) return s.with_context(fmt::format("layer {}", layers[l]));
        io.output(pos, rows);
        std::swap(in, out);
    }
    return Status::ok();
}

int64_t StepRunner::activation_bytes() const {
    int64_t b = 0;
    for (const auto& buffer : activations_) b += buffer ? static_cast<int64_t>(buffer->bytes()) : 0;
    return b;
}

}  // namespace sieve

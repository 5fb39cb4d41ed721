// The checked buffer transfers every backend shares (backends/backend.h): ownership and range
// checks here, the device's own byte moves behind transfer_bytes and fill_bytes; the wall-clock
// stream timer of host backends.
#include "sieve/backends/backend.h"

#include <chrono>

namespace sieve {

std::string_view buffer_usage_name(BufferUsage usage) {
    switch (usage) {
        case BufferUsage::weights: return "weights";
        case BufferUsage::cache: return "cache";
        case BufferUsage::workspace: return "workspace";
        case BufferUsage::step: return "step";
    }
    return "?";
}

namespace {

// [offset, offset + n) inside `b`, and `b` on `backend`'s device.
Status check_range(const Backend& backend, std::string_view call, const DeviceBuffer& b, size_t offset, size_t n) {
    if (&b.device() != &backend.device())
        return invalid_argument_error("{}: a buffer of device '{}' given to backend {} (device '{}')", call,
                                      b.device().name, backend.name(), backend.device().name);
    if (offset > b.bytes() || n > b.bytes() - offset)
        return invalid_argument_error("{}: bytes [{}, {} + {}) outside the {} buffer of {} bytes", call, offset, offset,
                                      n, buffer_usage_name(b.usage()), b.bytes());
    return Status::ok();
}

uint8_t* at(const DeviceBuffer& b, size_t offset) { return b.as<uint8_t>() + offset; }

}  // namespace

Expected<std::unique_ptr<DeviceBuffer>> Backend::buffer_wrap(void*, size_t bytes, BufferUsage usage,
                                                             std::string_view what) {
    return unsupported_error("{}: backend {} cannot take {} bytes of {} memory it does not own", what, name(), bytes,
                             buffer_usage_name(usage));
}

namespace {

// Host backends finish every op inside its call: the wall clock between two marks is the ops' time.
class WallClockTimer final : public StreamTimer {
public:
    Status start() override {
        start_ = Clock::now();
        return Status::ok();
    }
    Status stop() override {
        stop_ = Clock::now();
        return Status::ok();
    }
    Expected<double> seconds() override { return std::chrono::duration<double>(stop_ - start_).count(); }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point start_ = Clock::now(), stop_ = start_;
};

}  // namespace

Expected<std::unique_ptr<StreamTimer>> Backend::stream_timer() { return std::unique_ptr<StreamTimer>(new WallClockTimer); }

Expected<std::unique_ptr<StreamGraph>> Backend::capture(const std::function<Status()>&) {
    return unsupported_error("{}: capture: this backend runs each op inside its call, it has no stream to record", name());
}

Status Backend::buffer_upload(DeviceBuffer& dst, size_t dst_offset, const void* src, size_t n) {
    SIEVE_RETURN_IF_ERROR(check_range(*this, "buffer_upload", dst, dst_offset, n));
    if (n == 0) return Status::ok();
    if (src == nullptr) return invalid_argument_error("buffer_upload: {} bytes from a null host pointer", n);
    return transfer_bytes(Transfer::host_to_device, at(dst, dst_offset), src, n);
}

Status Backend::buffer_download(const DeviceBuffer& src, size_t src_offset, void* dst, size_t n) {
    SIEVE_RETURN_IF_ERROR(check_range(*this, "buffer_download", src, src_offset, n));
    if (n == 0) return Status::ok();
    if (dst == nullptr) return invalid_argument_error("buffer_download: {} bytes to a null host pointer", n);
    return transfer_bytes(Transfer::device_to_host, dst, at(src, src_offset), n);
}

Status Backend::buffer_copy(DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset,
                            size_t n) {
    SIEVE_RETURN_IF_ERROR(check_range(*this, "buffer_copy (destination)", dst, dst_offset, n));
    SIEVE_RETURN_IF_ERROR(check_range(*this, "buffer_copy (source)", src, src_offset, n));
    if (n == 0) return Status::ok();
    const uint8_t* d = at(dst, dst_offset);
    const uint8_t* s = at(src, src_offset);
    if (d < s + n && s < d + n)
        return invalid_argument_error("buffer_copy: {} bytes between overlapping ranges", n);
    return transfer_bytes(Transfer::device_to_device, at(dst, dst_offset), s, n);
}

Status Backend::buffer_fill(DeviceBuffer& dst, size_t dst_offset, uint8_t value, size_t n) {
    SIEVE_RETURN_IF_ERROR(check_range(*this, "buffer_fill", dst, dst_offset, n));
    if (n == 0) return Status::ok();
    return fill_bytes(at(dst, dst_offset), value, n);
}

}  // namespace sieve

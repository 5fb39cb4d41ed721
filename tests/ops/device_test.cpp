// The device half of the backend interface (backends/device_buffer.h, backend.h "device memory and
// stream"), on every variant of every registered backend kind: buffers are aligned and zeroed, bytes
// make the round trip host → buffer → buffer → host unchanged, fills land where asked, and a range
// outside a buffer or a buffer of another device is refused with an error naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/ops/hadamard.h"

namespace sieve::test {
namespace {

struct Variant {
    std::string spec;
    std::unique_ptr<Backend> backend;
};

std::vector<Variant> every_variant() {
    std::vector<Variant> out;
    for (const BackendKind& kind : backend_kinds())
        for (const std::string& spec : kind.variants()) {
            auto b = make_backend(spec);
            if (!b.has_value()) {
                ADD_FAILURE() << spec << " is listed as a variant of this machine but cannot be made: "
                              << b.status().to_string();
                continue;
            }
            out.push_back({spec, std::move(b).value()});
        }
    return out;
}

// A buffer of a device no backend has.
class ForeignBuffer final : public DeviceBuffer {
public:
    explicit ForeignBuffer(void* data, size_t bytes) : DeviceBuffer(data, bytes, BufferUsage::workspace, device()) {}

private:
    static const Device& device() {
        static const Device d{"elsewhere", false};
        return d;
    }
};

std::vector<uint8_t> download_all(Backend& b, const DeviceBuffer& buf) {
    std::vector<uint8_t> out(buf.bytes());
    EXPECT_TRUE(b.buffer_download(buf, 0, out.data(), out.size()).is_ok());
    return out;
}

TEST(Device, EveryKindHasAVariantHere) {
    for (const BackendKind& kind : backend_kinds()) {
        EXPECT_FALSE(kind.name.empty());
        EXPECT_FALSE(kind.specs.empty());
    }
    const auto variants = every_variant();
    EXPECT_GE(variants.size(), 2u);  // ref and at least the scalar cpu variant
}

TEST(Device, BuffersAreAlignedAndZeroed) {
    for (auto& [spec, b] : every_variant()) {
        SCOPED_TRACE(spec);
        for (size_t bytes : {size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
            auto buf = b->buffer_alloc(bytes, BufferUsage::cache, "a test buffer");
            ASSERT_TRUE(buf.has_value()) << buf.status().to_string();
            EXPECT_EQ((*buf)->bytes(), bytes);
            EXPECT_EQ((*buf)->usage(), BufferUsage::cache);
            EXPECT_EQ(&(*buf)->device(), &b->device());
            EXPECT_EQ(reinterpret_cast<uintptr_t>((*buf)->data()) % kBufferAlignment, 0u);
            const std::vector<uint8_t> got = download_all(*b, **buf);
            EXPECT_EQ(std::count(got.begin(), got.end(), 0), static_cast<std::ptrdiff_t>(bytes));
        }
        auto empty = b->buffer_alloc(0, BufferUsage::step, "an empty buffer");
        ASSERT_TRUE(empty.has_value());
        EXPECT_EQ((*empty)->bytes(), 0u);
        EXPECT_TRUE(b->buffer_download(**empty, 0, nullptr, 0).is_ok());
    }
}

TEST(Device, BytesRoundTripThroughUploadCopyFillDownload) {
    for (auto& [spec, b] : every_variant()) {
        SCOPED_TRACE(spec);
        constexpr size_t n = 777;
        auto a = std::move(b->buffer_alloc(n, BufferUsage::workspace, "a")).value();
        auto c = std::move(b->buffer_alloc(n + 100, BufferUsage::workspace, "c")).value();
        std::vector<uint8_t> src(n);
        std::iota(src.begin(), src.end(), uint8_t{3});
        ASSERT_TRUE(b->buffer_upload(*a, 0, src.data(), n).is_ok());
        src.assign(n, 0);  // the upload owns its copy once it returns
        ASSERT_TRUE(b->buffer_copy(*c, 50, *a, 0, n).is_ok());
        ASSERT_TRUE(b->buffer_fill(*c, 60, 0xee, 5).is_ok());
        ASSERT_TRUE(b->synchronize().is_ok());
        const std::vector<uint8_t> got = download_all(*b, *c);
        for (size_t i = 0; i < n + 100; ++i) {
            uint8_t want = 0;
            if (i >= 60 && i < 65)
                want = 0xee;
            else if (i >= 50 && i < 50 + n)
                want = static_cast<uint8_t>(3 + (i - 50));
            ASSERT_EQ(got[i], want) << "byte " << i;
        }
        // A partial download from an offset.
        uint8_t part[4] = {};
        ASSERT_TRUE(b->buffer_download(*a, 10, part, 4).is_ok());
        EXPECT_EQ(part[0], 13);
        EXPECT_EQ(part[3], 16);
    }
}

// buffer_wrap: a host device takes the caller's aligned host memory without owning it (the buffer's
// bytes are the caller's, and survive it); a device whose memory the host cannot touch refuses it:
// unsupported where it takes no foreign memory at all (host-copy), invalid_argument where it takes only
// memory of its own device (cuda: an engine's tensors).
TEST(Device, WrappedCallerMemoryIsSharedNotOwned) {
    for (auto& [spec, b] : every_variant()) {
        SCOPED_TRACE(spec);
        alignas(64) static uint8_t memory[256];
        std::fill(std::begin(memory), std::end(memory), uint8_t{7});
        auto wrapped = b->buffer_wrap(memory, sizeof(memory), BufferUsage::cache, "caller memory");
        if (!b->host_accessible()) {
            ASSERT_FALSE(wrapped.has_value());
            const Status& st = wrapped.status();
            EXPECT_TRUE(st.code() == StatusCode::unsupported ||
                        (st.code() == StatusCode::invalid_argument &&
                         st.message().find("is not device memory") != std::string::npos))
                << st.to_string();
            continue;
        }
        ASSERT_TRUE(wrapped.has_value()) << wrapped.status().to_string();
        EXPECT_EQ((*wrapped)->data(), memory);
        ASSERT_TRUE(b->buffer_fill(**wrapped, 10, 0x5a, 3).is_ok());
        wrapped->reset();  // must not free the caller's memory
        EXPECT_EQ(memory[9], 7);
        EXPECT_EQ(memory[10], 0x5a);
        EXPECT_EQ(memory[12], 0x5a);
        EXPECT_EQ(memory[13], 7);
        auto misaligned = b->buffer_wrap(memory + 1, 64, BufferUsage::cache, "caller memory");
        ASSERT_FALSE(misaligned.has_value());
        EXPECT_NE(misaligned.status().message().find("not 64-byte aligned"), std::string::npos);
    }
}

TEST(Device, RangesOutsideABufferAndForeignBuffersAreRefused) {
    for (auto& [spec, b] : every_variant()) {
        SCOPED_TRACE(spec);
        auto a = std::move(b->buffer_alloc(100, BufferUsage::weights, "a")).value();
        auto c = std::move(b->buffer_alloc(100, BufferUsage::weights, "c")).value();
        uint8_t host[200] = {};
        auto refused = [](const Status& s, std::string_view call, std::string_view what) {
            EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
            EXPECT_NE(s.message().find(call), std::string::npos) << s.message();
            EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
        };
        refused(b->buffer_upload(*a, 90, host, 11), "buffer_upload", "outside the weights buffer of 100 bytes");
        refused(b->buffer_download(*a, 101, host, 0), "buffer_download", "outside");
        refused(b->buffer_download(*a, SIZE_MAX, host, 2), "buffer_download", "outside");
        refused(b->buffer_copy(*c, 0, *a, 50, 51), "buffer_copy (source)", "outside");
        refused(b->buffer_copy(*c, 60, *a, 0, 41), "buffer_copy (destination)", "outside");
        refused(b->buffer_copy(*a, 0, *a, 10, 20), "buffer_copy", "overlapping");
        refused(b->buffer_fill(*a, 0, 1, 101), "buffer_fill", "outside");
        refused(b->buffer_upload(*a, 0, nullptr, 1), "buffer_upload", "null host pointer");
        ForeignBuffer foreign(host, sizeof host);
        refused(b->buffer_upload(foreign, 0, host, 1), "buffer_upload", "device 'elsewhere'");
        refused(b->buffer_copy(*a, 0, foreign, 0, 1), "buffer_copy (source)", "device 'elsewhere'");
        // Nothing refused was written.
        const std::vector<uint8_t> got = download_all(*b, *a);
        EXPECT_EQ(std::count(got.begin(), got.end(), 0), 100);
    }
}

// A host backend runs each op inside its call: it has no stream to record (Backend::capture), says so, and
// does not run the work it was given (the cuda backend's capture: cuda_backend_test.cpp).
TEST(Device, HostBackendsRefuseToCapture) {
    for (Variant& v : every_variant()) {
        if (!v.backend->host_accessible() && v.spec.rfind("cuda", 0) == 0) continue;
        bool ran = false;
        auto graph = v.backend->capture([&] {
            ran = true;
            return Status::ok();
        });
        ASSERT_FALSE(graph.has_value()) << v.spec;
        EXPECT_EQ(graph.status().code(), StatusCode::unsupported) << v.spec << ": " << graph.status().to_string();
        EXPECT_NE(graph.status().message().find("no stream to record"), std::string::npos) << graph.status().to_string();
        EXPECT_FALSE(ran) << v.spec;
    }
}

// host-copy's memory is out of the host's reach: a dereference of a buffer's address faults, and an op
// given a host address is refused naming the op and the field (the proof that nothing outside a backend
// touches device memory, and that ops get only device memory).
TEST(HostCopyDevice, HostCodeCannotTouchItsBuffers) {
    auto b = std::move(make_backend("host-copy")).value();
    EXPECT_FALSE(b->host_accessible());
    auto buf = std::move(b->buffer_alloc(256, BufferUsage::workspace, "rows")).value();
    EXPECT_DEATH({ buf->as<volatile uint8_t>()[3] = 1; }, "");
    EXPECT_DEATH({ [[maybe_unused]] volatile uint8_t x = buf->as<volatile uint8_t>()[0]; }, "");
    // Its own transfers still work.
    const uint8_t in[4] = {1, 2, 3, 4};
    uint8_t out[4] = {};
    ASSERT_TRUE(b->buffer_upload(*buf, 8, in, 4).is_ok());
    ASSERT_TRUE(b->buffer_download(*buf, 8, out, 4).is_ok());
    EXPECT_EQ(std::memcmp(in, out, 4), 0);
}

TEST(HostCopyDevice, OpsRefuseHostAddressesAndRunOnDeviceBuffers) {
    auto b = std::move(make_backend("host-copy")).value();
    const int64_t n = 2, dim = 8;
    const size_t bytes = static_cast<size_t>(n * dim) * sizeof(float);
    auto x = std::move(b->buffer_alloc(bytes, BufferUsage::workspace, "x")).value();
    auto y = std::move(b->buffer_alloc(bytes, BufferUsage::workspace, "y")).value();
    std::vector<float> host(static_cast<size_t>(n * dim));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) - 5.0f;
    ASSERT_TRUE(b->buffer_upload(*x, 0, host.data(), bytes).is_ok());
    HadamardParams p;
    p.x = x->data();
    p.y = y->data();
    p.n_tokens = n;
    p.dim = dim;
    p.x_token_stride = p.y_token_stride = dim;
    p.x_head_stride = p.y_head_stride = dim;
    p.scale = 0.5f;
    ASSERT_TRUE(b->hadamard(p).is_ok());
    std::vector<float> got(host.size()), want(host.size());
    ASSERT_TRUE(b->buffer_download(*y, 0, got.data(), bytes).is_ok());
    HadamardParams h = p;
    h.x = host.data();
    h.y = want.data();
    ASSERT_TRUE(std::move(make_backend("ref")).value()->hadamard(h).is_ok());
    EXPECT_EQ(got, want);  // the inner ref backend ran on the device bytes
    // The same op with a host output is refused before anything runs.
    HadamardParams to_host = p;
    to_host.y = want.data();
    const Status s = b->hadamard(to_host);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("hadamard: y = "), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("is not memory of device 'host-copy'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sieve::test

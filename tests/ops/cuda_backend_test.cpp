// The cuda backend on a machine with a GPU: its spec, device and errors. The op conformance cases run
// it through the harness (backends_under_test lists every cuda variant the machine has).
//
// Without a GPU (or in a build without CUDA) there is nothing to test: the binary says so and exits with
// kNoGpuExit, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/ops/linear.h"
#include "sieve/ops/rope.h"

namespace sieve::test {
namespace {

constexpr int kNoGpuExit = 77;

std::vector<std::string> cuda_variants() {
    for (const BackendKind& kind : backend_kinds())
        if (kind.name == "cuda") return kind.variants();
    return {};
}

std::unique_ptr<Backend> first_gpu() {
    auto b = make_backend(cuda_variants().front());
    EXPECT_TRUE(b.has_value()) << b.status().to_string();
    return b.has_value() ? std::move(b).value() : nullptr;
}

TEST(CudaBackend, IsADeviceTheHostCannotTouch) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->name(), "cuda:0");
    EXPECT_EQ(b->device().name, "cuda:0");
    EXPECT_FALSE(b->host_accessible());
    auto same = make_backend("cuda");
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(&(*same)->device(), &b->device());  // one Device per GPU: buffers move between its backends
}

TEST(CudaBackend, SpecErrorsNameTheProblem) {
    auto bad = make_backend("cuda:x");
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
    auto absent = make_backend("cuda:15");
    ASSERT_FALSE(absent.has_value());
    EXPECT_EQ(absent.status().code(), StatusCode::unsupported);
    EXPECT_NE(absent.status().message().find("CUDA device"), std::string::npos) << absent.status().message();
}

// Params are validated on the host before anything is enqueued: a malformed call is invalid_argument, as on
// every backend, and a well-formed one runs.
TEST(CudaBackend, ValidatesParamsBeforeLaunching) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    auto x = b->buffer_alloc(4 * 64 * sizeof(float), BufferUsage::workspace, "x");
    auto pos = b->buffer_alloc(4 * sizeof(int64_t), BufferUsage::step, "positions");
    auto freq = b->buffer_alloc(16 * sizeof(float), BufferUsage::weights, "inv_freq");
    ASSERT_TRUE(x.has_value() && pos.has_value() && freq.has_value());
    RopeParams p;
    p.x = p.y = (*x)->data();
    p.positions = (*pos)->data();
    p.inv_freq = (*freq)->as<float>();
    p.n_tokens = 4;
    p.head_dim = 64;
    p.rot_dim = 32;
    p.x_token_stride = p.y_token_stride = 64;
    p.x_head_stride = p.y_head_stride = 64;
    EXPECT_TRUE(b->rope(p).is_ok());
    p.rot_dim = 65;  // odd
    const Status bad = b->rope(p);
    EXPECT_EQ(bad.code(), StatusCode::invalid_argument) << bad.to_string();
    EXPECT_TRUE(b->synchronize().is_ok());
}

TEST(CudaBackend, WrapsOnlyItsOwnDeviceMemory) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    auto owned = b->buffer_alloc(4096, BufferUsage::cache, "a cache");
    ASSERT_TRUE(owned.has_value());
    auto view = b->buffer_wrap((*owned)->data(), 4096, BufferUsage::cache, "an engine's cache");
    ASSERT_TRUE(view.has_value()) << view.status().to_string();
    EXPECT_EQ((*view)->data(), (*owned)->data());
    alignas(64) static uint8_t host[4096];
    auto refused = b->buffer_wrap(host, sizeof host, BufferUsage::cache, "host memory");
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument) << refused.status().to_string();
}

// Prepared weights count while they live (what `sieve run` states as resident weights).
TEST(CudaBackend, CountsItsPreparedWeights) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    std::vector<float> w(64 * 32, 0.5f);
    LinearWeights lw;
    lw.weight = w.data();
    lw.weight_type = DType::f32;
    lw.out_features = 64;
    lw.in_features = 32;
    lw.weight_row_stride = 32;
    const size_t before = b->prepared_weight_bytes();
    auto prepared = b->linear_prepare(lw);
    ASSERT_TRUE(prepared.has_value()) << prepared.status().to_string();
    EXPECT_EQ(b->prepared_weight_bytes(), before + (*prepared)->bytes());
    EXPECT_GE((*prepared)->bytes(), 64u * 32u * 4u);
    prepared = unsupported_error("released");
    EXPECT_EQ(b->prepared_weight_bytes(), before);
}

// The stream timer measures device time in stream order: a 256 MiB fill takes measurably long (well above
// the events' resolution), an empty interval almost nothing.
TEST(CudaBackend, TimesWorkInStreamOrder) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    auto timer = b->stream_timer();
    ASSERT_TRUE(timer.has_value()) << timer.status().to_string();
    auto buf = b->buffer_alloc(size_t{256} << 20, BufferUsage::workspace, "fill target");
    ASSERT_TRUE(buf.has_value());
    ASSERT_TRUE((*timer)->start().is_ok());
    ASSERT_TRUE(b->buffer_fill(**buf, 0, 7, (*buf)->bytes()).is_ok());
    ASSERT_TRUE((*timer)->stop().is_ok());
    auto filled = (*timer)->seconds();
    ASSERT_TRUE(filled.has_value()) << filled.status().to_string();
    EXPECT_GT(*filled, 10e-6);  // 256 MiB at ≤ 5 TB/s: ≥ 50 µs
    ASSERT_TRUE((*timer)->start().is_ok());
    ASSERT_TRUE((*timer)->stop().is_ok());
    auto empty = (*timer)->seconds();
    ASSERT_TRUE(empty.has_value());
    EXPECT_LT(*empty, *filled);
}

// Work recorded by capture runs only when replayed, each replay again, in stream order with the backend's
// other work; a capture whose work waits for the device fails, naming the capture, and leaves the stream
// usable.
TEST(CudaBackend, CapturesStreamWorkIntoAReplayableGraph) {
    auto b = first_gpu();
    ASSERT_NE(b, nullptr);
    auto buf = b->buffer_alloc(4096, BufferUsage::workspace, "target");
    ASSERT_TRUE(buf.has_value());
    auto graph = b->capture([&] { return b->buffer_fill(**buf, 0, 0x5a, 4096); });
    ASSERT_TRUE(graph.has_value()) << graph.status().to_string();
    std::vector<uint8_t> host(4096, 1);
    ASSERT_TRUE(b->buffer_download(**buf, 0, host.data(), host.size()).is_ok());
    EXPECT_EQ(host, std::vector<uint8_t>(4096, 0)) << "the captured fill ran during the capture";
    for (int replay = 0; replay < 2; ++replay) {
        ASSERT_TRUE((*graph)->replay().is_ok());
        ASSERT_TRUE(b->buffer_download(**buf, 0, host.data(), host.size()).is_ok());
        EXPECT_EQ(host, std::vector<uint8_t>(4096, 0x5a)) << "replay " << replay;
        ASSERT_TRUE(b->buffer_fill(**buf, 0, 0, 4096).is_ok());
    }

    auto waits = b->capture([&] { return b->synchronize(); });
    ASSERT_FALSE(waits.has_value());
    EXPECT_NE(waits.status().message().find("captur"), std::string::npos) << waits.status().to_string();
    ASSERT_TRUE(b->buffer_fill(**buf, 0, 3, 4096).is_ok());
    ASSERT_TRUE(b->buffer_download(**buf, 0, host.data(), host.size()).is_ok());
    EXPECT_EQ(host, std::vector<uint8_t>(4096, 3));
}

}  // namespace
}  // namespace sieve::test

int main(int argc, char** argv) {
    if (sieve::test::cuda_variants().empty()) {
        std::fprintf(stderr, "test_cuda_backend: no CUDA GPU here (or this build has no CUDA backend): the cuda "
                             "suite did not run\n");
        return sieve::test::kNoGpuExit;
    }
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

// The cuda kernels' fp8_model1 conversion (backends/cuda/fp8.cuh e4m3x8_scaled_to_bf16) against core/dtype.h's
// host rules, for every e4m3 byte under every UE8M0 scale byte: bf16(e4m3 · 2^(scale − 127)), rounded to
// nearest even, bit for bit (NaN: any NaN). The attention kernels take most octets through its bit-placing
// path and the rest (a NaN byte, a NaN or large scale) through fp32; both must give the host's bits. The
// octets hold the 256 bytes in order and in a scattered order, and a NaN byte at each of the eight places
// among ordinary ones (the NaN test works on whole words, with carries between bytes).
//
// Without a GPU the binary says so and exits 77, which ctest reports as skipped, never as passed.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backends/cuda/fp8.cuh"
#include "sieve/core/dtype.h"

namespace sieve::test {
namespace {

constexpr int kNoGpuExit = 77;

__global__ void convert_octets(const uint2* octets, const uint32_t* scales, uint4* out, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = cuda::e4m3x8_scaled_to_bf16(octets[i], scales[i]);
}

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// Octets of the three kinds above, each under every scale byte.
struct Cases {
    std::vector<uint8_t> bytes;  // 8 an octet
    std::vector<uint32_t> scales;
};
Cases all_cases() {
    std::vector<std::array<uint8_t, 8>> octets;
    for (int q = 0; q < 32; ++q) {
        std::array<uint8_t, 8> in_order{}, scattered{};
        for (int i = 0; i < 8; ++i) {
            in_order[static_cast<size_t>(i)] = static_cast<uint8_t>(8 * q + i);
            scattered[static_cast<size_t>(i)] = static_cast<uint8_t>((8 * q + i) * 37 % 256);  // 37 is odd: a permutation
        }
        octets.push_back(in_order);
        octets.push_back(scattered);
    }
    for (const uint8_t nan : {uint8_t{0x7f}, uint8_t{0xff}})
        for (int place = 0; place < 8; ++place) {
            std::array<uint8_t, 8> o{0x7e, 0xfe, 0x38, 0x01, 0x80, 0x00, 0x7e, 0xfe};  // the largest, 1, subnormal, ±0
            o[static_cast<size_t>(place)] = nan;
            octets.push_back(o);
        }
    Cases c;
    for (uint32_t scale = 0; scale < 256; ++scale)
        for (const auto& o : octets) {
            c.bytes.insert(c.bytes.end(), o.begin(), o.end());
            c.scales.push_back(scale);
        }
    return c;
}

TEST(CudaFp8, ScaledE4m3ToBf16MatchesTheHostRuleForEveryByteAndScale) {
    const Cases c = all_cases();
    const int n = static_cast<int>(c.scales.size());
    uint2* d_octets = nullptr;
    uint32_t* d_scales = nullptr;
    uint4* d_out = nullptr;
    ASSERT_CUDA(cudaMalloc(&d_octets, c.bytes.size()));
    ASSERT_CUDA(cudaMalloc(&d_scales, c.scales.size() * 4));
    ASSERT_CUDA(cudaMalloc(&d_out, static_cast<size_t>(n) * 16));
    ASSERT_CUDA(cudaMemcpy(d_octets, c.bytes.data(), c.bytes.size(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemcpy(d_scales, c.scales.data(), c.scales.size() * 4, cudaMemcpyHostToDevice));
    convert_octets<<<(n + 255) / 256, 256>>>(d_octets, d_scales, d_out, n);
    ASSERT_CUDA(cudaGetLastError());
    std::vector<uint16_t> out(static_cast<size_t>(n) * 8);
    ASSERT_CUDA(cudaMemcpy(out.data(), d_out, out.size() * 2, cudaMemcpyDeviceToHost));
    cudaFree(d_octets);
    cudaFree(d_scales);
    cudaFree(d_out);

    int64_t wrong = 0, fast = 0;
    for (int i = 0; i < n; ++i) {
        const uint32_t scale = c.scales[static_cast<size_t>(i)];
        bool nan_byte = false;
        for (int k = 0; k < 8; ++k) {
            const uint8_t b = c.bytes[static_cast<size_t>(8 * i + k)];
            nan_byte = nan_byte || (b & 0x7f) == 0x7f;
            const float want = fp8_e4m3_to_f32(b) * ue8m0_to_f32(static_cast<uint8_t>(scale));
            const uint16_t got = out[static_cast<size_t>(8 * i + k)];
            const bool ok = std::isnan(want) ? std::isnan(bf16_to_f32(got)) : got == f32_to_bf16(want);
            if (!ok && ++wrong <= 10)
                ADD_FAILURE() << "byte 0x" << std::hex << int{b} << " scale 0x" << scale << ": got 0x" << got << ", want 0x"
                              << f32_to_bf16(want) << std::dec;
        }
        fast += !nan_byte && scale <= 134 ? 1 : 0;
    }
    EXPECT_EQ(wrong, 0) << "of " << 8 * int64_t{n} << " values";
    // Both paths ran: the bit-placing one for the octets of scales 0 … 134 without a NaN byte (8100 of the
    // 20480), the fp32 one for the rest.
    EXPECT_GT(fast, n / 4);
    EXPECT_LT(fast, n / 2);
}

}  // namespace
}  // namespace sieve::test

int main(int argc, char** argv) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "test_cuda_fp8: no CUDA GPU here: the conversion test did not run\n");
        return sieve::test::kNoGpuExit;
    }
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

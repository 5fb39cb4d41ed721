#include "core/cpu_features.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

TEST(CpuFeatures, LevelsAreConsistent) {
    const CpuFeatures& f = cpu_features();
    const Isa hw = hardware_isa();
    if (hw >= Isa::avx2) {
        EXPECT_TRUE(f.avx2 && f.fma);
    }
    if (hw >= Isa::avx512) {
        EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl);
    }
    if (hw >= Isa::avx512_bf16) {
        EXPECT_TRUE(f.avx512_bf16);
    }
    if (hw >= Isa::amx_bf16) {
        EXPECT_TRUE(f.amx_tile && f.amx_bf16 && f.amx_granted);
    }
    EXPECT_EQ(hw >= Isa::amx_bf16, hw >= Isa::avx512_bf16 && f.amx_granted);
    EXPECT_LE(static_cast<int>(active_isa()), static_cast<int>(hw));
    const auto isas = supported_isas();
    ASSERT_FALSE(isas.empty());
    EXPECT_EQ(isas.front(), Isa::scalar);
    EXPECT_EQ(isas.back(), active_isa());
}

TEST(CpuFeatures, IsaNamesRoundTrip) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx_bf16})
        EXPECT_EQ(isa_from_name(isa_name(isa)), isa);
    EXPECT_FALSE(isa_from_name("sse9").has_value());
}

}  // namespace
}  // namespace sieve

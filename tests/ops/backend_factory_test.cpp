// make_backend(): names, canonical spellings and refusals.
#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "harness.h"

namespace sieve::test {
namespace {

TEST(BackendFactory, NamesAndDefaults) {
    auto ref = make_backend("ref");
    ASSERT_TRUE(ref.has_value());
    EXPECT_EQ((*ref)->name(), "ref");
    auto cpu = make_backend("cpu");
    ASSERT_TRUE(cpu.has_value()) << cpu.status().to_string();
    EXPECT_EQ((*cpu)->name(), fmt::format("cpu:{}:{}", isa_name(active_isa()), cpu_backend_has_dnnl() ? "auto" : "nodnnl"));
    for (Isa isa : supported_isas()) {
        auto b = make_backend(fmt::format("cpu:{}", isa_name(isa)));
        ASSERT_TRUE(b.has_value()) << b.status().to_string();
        // below active_isa() oneDNN cannot follow, so the default GEMM there is the own one
        const bool dnnl_default = cpu_backend_has_dnnl() && isa == active_isa();
        EXPECT_EQ((*b)->name(), fmt::format("cpu:{}:{}", isa_name(isa), dnnl_default ? "auto" : "nodnnl"));
        auto own = make_backend(fmt::format("cpu:{}:nodnnl", isa_name(isa)));
        ASSERT_TRUE(own.has_value());
        EXPECT_EQ((*own)->name(), fmt::format("cpu:{}:nodnnl", isa_name(isa)));
    }
}

TEST(BackendFactory, RefusesWhatItCannotDo) {
    EXPECT_EQ(make_backend("gpu").status().code(), StatusCode::invalid_argument);
    EXPECT_EQ(make_backend("cpu:avx9").status().code(), StatusCode::invalid_argument);
    EXPECT_EQ(make_backend("cpu:avx2:avx2").status().code(), StatusCode::invalid_argument);
    EXPECT_EQ(make_backend("cpu:nodnnl:avx2").status().code(), StatusCode::invalid_argument);
    EXPECT_EQ(make_backend("cpu:avx2:nodnnl:x").status().code(), StatusCode::invalid_argument);
    if (cpu_backend_has_dnnl()) {
        EXPECT_TRUE(make_backend("cpu:dnnl").has_value());
        if (active_isa() != Isa::scalar) {  // oneDNN's ISA is process-wide: not at a lower level
            auto b = make_backend("cpu:scalar:dnnl");
            EXPECT_EQ(b.status().code(), StatusCode::unsupported);
            EXPECT_NE(b.status().message().find("process-wide"), std::string::npos) << b.status().message();
        }
    } else {
        auto b = make_backend("cpu:dnnl");
        EXPECT_EQ(b.status().code(), StatusCode::unsupported);
        EXPECT_NE(b.status().message().find("SIEVE_WITH_DNNL=OFF"), std::string::npos) << b.status().message();
    }
    // An ISA above active_isa() (run this test with SIEVE_ISA=avx2 to see it on an AVX-512 machine;
    // tests/ops/CMakeLists.txt does).
    if (active_isa() != Isa::amx_bf16) {
        CpuBackendOptions o;
        o.isa = Isa::amx_bf16;
        auto b = make_cpu_backend(o);
        EXPECT_EQ(b.status().code(), StatusCode::unsupported);
        EXPECT_NE(b.status().message().find("not available"), std::string::npos) << b.status().message();
        EXPECT_EQ(make_backend("cpu:amx_bf16").status().code(), StatusCode::unsupported);
    }
}

}  // namespace
}  // namespace sieve::test

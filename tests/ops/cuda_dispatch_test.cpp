// Which kernel the cuda backend's sparse_attention picks (host logic, no GPU needed): the real DeepSeek-V4 and
// V3.2 / Hy4 decode shapes must reach the warpgroup (wgmma) kernel at any batch, so that the GPU conformance
// cases and the benchmark's timings are of the kernel meant for them.
#include <gtest/gtest.h>

#include <ostream>

#include "backends/cuda/attention_kernels.h"

namespace sieve::cuda {
// Failures name the kernel.
void PrintTo(SparseAttentionPath path, std::ostream* os) {
    *os << (path == SparseAttentionPath::wgmma ? "wgmma" : path == SparseAttentionPath::mma_sync ? "mma_sync" : "generic");
}
}  // namespace sieve::cuda

namespace sieve::test {
namespace {

using cuda::SparseAttentionPath;

// DeepSeek-V4's attention at decode: 64 heads, a 128-entry window list and a 512-entry compressed list of
// fp8_model1 records (qk = v = 512, rope 64).
SparseAttentionParams deepseek_v4(int64_t tokens, int64_t heads = 64) {
    SparseAttentionParams p;
    p.n_tokens = tokens;
    p.n_heads = heads;
    p.qk_dim = 512;
    p.v_dim = 512;
    p.rope_dim = 64;
    p.q_type = DType::bf16;
    p.out_type = DType::bf16;
    p.main.format = p.extra.format = CacheRecordFormat::fp8_model1;
    p.main.width = 128;
    p.extra.width = 512;
    return p;
}

// DeepSeek-V3.2's: 128 heads over the top-2048 fp8_v32 records (qk 576, v 512, rope 64).
SparseAttentionParams deepseek_v32(int64_t tokens) {
    SparseAttentionParams p;
    p.n_tokens = tokens;
    p.n_heads = 128;
    p.qk_dim = 576;
    p.v_dim = 512;
    p.rope_dim = 64;
    p.q_type = DType::bf16;
    p.out_type = DType::bf16;
    p.main.format = CacheRecordFormat::fp8_v32;
    p.main.width = 2048;
    return p;
}

TEST(CudaSparseAttentionDispatch, RealShapesTakeTheWarpgroupKernelAtAnyBatch) {
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v4(1)), SparseAttentionPath::wgmma);
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v4(4)), SparseAttentionPath::wgmma);
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v4(128)), SparseAttentionPath::wgmma);
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v32(1)), SparseAttentionPath::wgmma);
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v32(256)), SparseAttentionPath::wgmma);
}

TEST(CudaSparseAttentionDispatch, OtherShapesTakeTheKernelsThatCoverThem) {
    // No more heads than one mma.sync block holds.
    EXPECT_EQ(cuda::sparse_attention_path(deepseek_v4(128, 32)), SparseAttentionPath::mma_sync);
    // f32 q, or f32 records: only the generic kernel.
    SparseAttentionParams f32_q = deepseek_v32(64);
    f32_q.q_type = DType::f32;
    EXPECT_EQ(cuda::sparse_attention_path(f32_q), SparseAttentionPath::generic);
    SparseAttentionParams f32_records = deepseek_v4(64);
    f32_records.main.format = f32_records.extra.format = CacheRecordFormat::f32;
    EXPECT_EQ(cuda::sparse_attention_path(f32_records), SparseAttentionPath::generic);
    // Another v_dim than the warpgroup kernel's 512.
    SparseAttentionParams narrow_v = deepseek_v32(64);
    narrow_v.v_dim = 256;
    EXPECT_EQ(cuda::sparse_attention_path(narrow_v), SparseAttentionPath::mma_sync);
}

}  // namespace
}  // namespace sieve::test

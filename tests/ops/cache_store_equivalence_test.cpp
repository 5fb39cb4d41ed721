// cache_store writes the bytes of the three ops it replaces (kv_store: DeepSeek-V4 records and indexer
// keys, bf16-rounded; sparse_mla_cache_write: DSA latent entries [c | kr]; dsa_indexer_key_write: DSA
// indexer keys), on ref and on every cpu backend, for random rows with NaN / inf / subnormal members.
#include <limits>
#include <numeric>

#include "dsv4_cache_util.h"
#include "ops/cache_store.h"
#include "ops/dsa_indexer.h"
#include "ops/kv_record.h"
#include "ops/sparse_mla.h"

namespace sieve::test {
namespace {

std::vector<float> rows(Rng& rng, int64_t n, int64_t stride) {
    std::vector<float> x(static_cast<size_t>(n * stride));
    for (size_t i = 0; i < x.size(); ++i) {
        const int64_t r = static_cast<int64_t>(i) / stride;
        float v = rng.normal(std::ldexp(1.0f, static_cast<int>(r % 13) - 6));
        if (rng.coin(0.03)) v *= 1e-5f;
        if (rng.coin(0.004)) v = std::numeric_limits<float>::quiet_NaN();
        if (rng.coin(0.003)) v = -std::numeric_limits<float>::infinity();
        if (rng.coin(0.003)) v = 3.3e38f;  // rounds to inf in bf16
        x[i] = v;
    }
    return x;
}

std::vector<Backend*> all_backends(std::unique_ptr<Backend>& ref, std::vector<NamedBackend>& bs) {
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : bs) all.push_back(nb.backend.get());
    return all;
}

TEST(CacheStoreEquivalence, SameBytesAsKvStore) {
    auto ref = ref_backend();
    auto bs = backends_under_test();
    Rng rng(901);
    const std::vector<KvRecordLayout> layouts = {{KvRecordFormat::fp8_ds_mla, 512, 64}, {KvRecordFormat::fp8_ds_mla, 32, 8},
                                                 {KvRecordFormat::fp8_ds_mla, 200, 8},  {KvRecordFormat::fp8_ds_mla, 64, 64},
                                                 {KvRecordFormat::fp8_scaled, 128, 0},  {KvRecordFormat::fp8_scaled, 16, 0},
                                                 {KvRecordFormat::f32, 32, 8}};
    for (const KvRecordLayout& l : layouts)
        for (DType xt : {DType::f32, DType::bf16})
            for (Backend* b : all_backends(ref, bs)) {
                SCOPED_TRACE(fmt::format("{} {} dim {} x {}", b->name(), kv_record_format_name(l.format), l.dim, dtype_name(xt)));
                const int64_t n = 11, stride = l.dim + 3, bsz = 4, nb = 4;
                std::vector<float> x = rows(rng, n, stride);
                std::vector<uint16_t> xb(x.size());
                for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
                std::vector<int32_t> slots = random_slots(rng, n, bsz * nb);
                slots[2] = -1;
                TestCache old_c(l.entry_bytes(), bsz, nb), new_c(l.entry_bytes(), bsz, nb);
                KvStoreParams o;
                o.x = xt == DType::bf16 ? static_cast<const void*>(xb.data()) : x.data();
                o.x_type = xt;
                o.slots = slots.data();
                o.cache = old_c.view();
                o.layout = l;
                o.n_rows = n;
                o.x_row_stride = stride;
                ASSERT_TRUE(b->kv_store(o).is_ok());
                CacheStoreParams p;
                p.x = o.x;
                p.x_type = xt;
                p.slots = slots.data();
                p.cache = new_c.view();
                p.layout = {l.format == KvRecordFormat::f32          ? CacheRecordFormat::f32
                            : l.format == KvRecordFormat::fp8_scaled ? CacheRecordFormat::fp8_row_scale
                                                                     : CacheRecordFormat::fp8_model1,
                            l.dim, l.rope_dim};
                p.n_slots = new_c.capacity();
                p.n_rows = n;
                p.dim = l.dim;
                p.x_row_stride = stride;
                p.round_bf16 = true;
                const Status st = b->cache_store(p);
                ASSERT_TRUE(st.is_ok()) << st.to_string();
                EXPECT_TRUE(bytes_equal(old_c.buf.data(), new_c.buf.data(), old_c.buf.bytes(), "cache"));
            }
}

TEST(CacheStoreEquivalence, SameBytesAsSparseMlaCacheWrite) {
    auto ref = ref_backend();
    auto bs = backends_under_test();
    Rng rng(902);
    const std::vector<std::pair<int64_t, int64_t>> dims = {{512, 64}, {32, 8}, {40, 8}, {256, 64}, {128, 0}, {384, 32}};
    for (const auto& [r, dr] : dims)
        for (SparseMlaCacheFormat f : {SparseMlaCacheFormat::f32, SparseMlaCacheFormat::fp8_ds_mla})
            for (DType xt : {DType::f32, DType::bf16})
                for (Backend* b : all_backends(ref, bs)) {
                    SCOPED_TRACE(fmt::format("{} {} R {} Dr {} x {}", b->name(), sparse_mla_cache_format_name(f), r, dr,
                                             dtype_name(xt)));
                    const int64_t n = 9, stride = r + dr + 5, bsz = 4, nb = 4;
                    std::vector<float> x = rows(rng, n, stride);
                    std::vector<uint16_t> xb(x.size());
                    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
                    const void* xp = xt == DType::bf16 ? static_cast<const void*>(xb.data()) : x.data();
                    std::vector<int32_t> slots32 = random_slots(rng, n, bsz * nb);
                    slots32[3] = -1;
                    std::vector<int64_t> slots64(slots32.begin(), slots32.end());
                    const int64_t entry = sparse_mla_entry_bytes(f, r, dr);
                    TestCache old_c(entry, bsz, nb), new_c(entry, bsz, nb);
                    SparseMlaCacheWriteParams o;
                    o.latent = xp;
                    o.rope = static_cast<const char*>(xp) + r * dtype_size(xt);
                    o.slots = slots64.data();
                    o.cache = old_c.view();
                    o.n_slots = old_c.capacity();
                    o.n_tokens = n;
                    o.kv_lora_rank = r;
                    o.rope_dim = dr;
                    o.latent_row_stride = o.rope_row_stride = stride;
                    o.format = f;
                    o.latent_type = o.rope_type = xt;
                    ASSERT_TRUE(b->sparse_mla_cache_write(o).is_ok());
                    CacheStoreParams p;
                    p.x = xp;
                    p.x_type = xt;
                    p.slots = slots32.data();
                    p.cache = new_c.view();
                    p.layout = {f == SparseMlaCacheFormat::f32 ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_v32, r + dr, dr};
                    ASSERT_EQ(p.layout.entry_bytes(), entry);
                    p.n_slots = new_c.capacity();
                    p.n_rows = n;
                    p.dim = r + dr;
                    p.x_row_stride = stride;
                    const Status st = b->cache_store(p);
                    ASSERT_TRUE(st.is_ok()) << st.to_string();
                    EXPECT_TRUE(bytes_equal(old_c.buf.data(), new_c.buf.data(), old_c.buf.bytes(), "cache"));
                }
}

TEST(CacheStoreEquivalence, SameBytesAsDsaIndexerKeyWrite) {
    auto ref = ref_backend();
    auto bs = backends_under_test();
    Rng rng(903);
    for (int64_t d : {128, 16, 20, 64, 1})
        for (DsaIndexerKeyFormat f : {DsaIndexerKeyFormat::f32, DsaIndexerKeyFormat::fp8_blocked})
            for (DType xt : {DType::f32, DType::bf16})
                for (Backend* b : all_backends(ref, bs)) {
                    SCOPED_TRACE(fmt::format("{} {} Di {} x {}", b->name(), dsa_indexer_key_format_name(f), d, dtype_name(xt)));
                    const int64_t n = 13, stride = d + 2, bsz = 4, nb = 4;
                    std::vector<float> x = rows(rng, n, stride);
                    std::vector<uint16_t> xb(x.size());
                    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
                    const void* xp = xt == DType::bf16 ? static_cast<const void*>(xb.data()) : x.data();
                    std::vector<int32_t> slots32 = random_slots(rng, n, bsz * nb);
                    slots32[0] = -1;
                    std::vector<int64_t> slots64(slots32.begin(), slots32.end());
                    const int64_t entry = dsa_indexer_key_entry_bytes(f, d);
                    TestCache old_c(entry, bsz, nb), new_c(entry, bsz, nb);
                    DsaIndexerKeyWriteParams o;
                    o.k = xp;
                    o.slots = slots64.data();
                    o.cache = old_c.view();
                    o.n_slots = old_c.capacity();
                    o.n_tokens = n;
                    o.head_dim = d;
                    o.k_row_stride = stride;
                    o.format = f;
                    o.k_type = xt;
                    ASSERT_TRUE(b->dsa_indexer_key_write(o).is_ok());
                    CacheStoreParams p;
                    p.x = xp;
                    p.x_type = xt;
                    p.slots = slots32.data();
                    p.cache = new_c.view();
                    p.layout = {f == DsaIndexerKeyFormat::f32 ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_row_scale, d, 0};
                    p.n_slots = new_c.capacity();
                    p.n_rows = n;
                    p.dim = d;
                    p.x_row_stride = stride;
                    const Status st = b->cache_store(p);
                    ASSERT_TRUE(st.is_ok()) << st.to_string();
                    EXPECT_TRUE(bytes_equal(old_c.buf.data(), new_c.buf.data(), old_c.buf.bytes(), "cache"));
                }
}

}  // namespace
}  // namespace sieve::test

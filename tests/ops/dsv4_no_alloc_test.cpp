// "run of an op allocates nothing" (DESIGN.md) for DeepSeek-V4's ops on every cpu backend variant:
// operator new is replaced by a counting version; each op runs once to warm up, then again counted
// (on any thread of the pool).
#include "alloc_counter.h"
#include "paged_cache.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::test {
namespace {

TEST(Dsv4NoAllocation, EveryCpuOpRunsWithoutAllocating) {
    Rng rng(4505);
    const int64_t n = 6, H = 4, d = 512, r = 64, cI = 128, HI = 8;
    const CacheRecordLayout kv{CacheRecordFormat::fp8_model1, d, r}, keys{CacheRecordFormat::fp8_row_scale, cI, 0};
    PagedTestCache kv_cache(4, 4, kv.entry_bytes(), 64), key_cache(4, 4, keys.entry_bytes(), 64), state(2, 8, 8 * 2 * 64, 64);
    std::vector<float> rows(static_cast<size_t>(n * d)), q(static_cast<size_t>(n * H * d)), out(q.size());
    std::vector<float> iq(static_cast<size_t>(n * HI * cI)), iw(static_cast<size_t>(n * HI)), scores(static_cast<size_t>(n * n));
    std::vector<float> ab(static_cast<size_t>(n * 2 * 128)), ape(static_cast<size_t>(4 * 128)), pooled(2 * 64), sink(H, 0.5f);
    for (auto* v : {&rows, &q, &iq, &iw, &ab, &ape}) for (float& x : *v) x = rng.normal();
    std::vector<int32_t> slots = {0, 1, 2, 3, 4, 5}, window(static_cast<size_t>(n * 3)), token_list(n, 0), n_keys(n);
    for (int64_t t = 0; t < n; ++t) {
        n_keys[static_cast<size_t>(t)] = static_cast<int32_t>(t + 1);
        for (int64_t j = 0; j < 3; ++j) window[static_cast<size_t>(t * 3 + j)] = static_cast<int32_t>(std::max<int64_t>(t - j, -1));
    }
    std::vector<int64_t> pos = {0, 1, 2, 3, 4, 5};
    std::vector<int32_t> gather = {-1, -1, -1, -1, 0, 1, 2, 3};
    const std::vector<int32_t> key_table = {0, 1};  // the request's entries 0..5: slots 0..5 (blocks of 4)

    for (auto& nb : host_backends_under_test()) {
        SCOPED_TRACE(nb.spec);
        Backend& b = *nb.backend;
        CacheStoreParams st;
        st.x = rows.data();
        st.slots = slots.data();
        st.cache = kv_cache.view();
        st.layout = kv;
        st.n_slots = kv_cache.n_slots();
        st.n_rows = n;
        st.dim = d;
        st.x_row_stride = d;
        st.round_bf16 = true;
        CacheStoreParams kst = st;
        kst.cache = key_cache.view();
        kst.layout = keys;
        kst.n_slots = key_cache.n_slots();
        kst.dim = cI;
        kst.x_row_stride = cI;
        KvLoadParams ld;
        ld.cache = kv_cache.view();
        ld.layout = kv;
        ld.slots = slots.data();
        ld.y = out.data();
        ld.n_rows = n;
        ld.y_row_stride = d;
        CompressorStateStoreParams ss;
        ss.kv = ab.data();
        ss.gate = ab.data() + 128;
        ss.ape = ape.data();
        ss.positions = pos.data();
        ss.slots = slots.data();
        ss.state = state.view();
        ss.n_tokens = n;
        ss.width = 128;
        ss.ratio = 4;
        ss.kv_row_stride = ss.gate_row_stride = 256;
        CompressorPoolParams pp;
        pp.state = state.view();
        pp.gather_slots = gather.data();
        pp.out = pooled.data();
        pp.n_entries = 1;
        pp.head_dim = 64;
        pp.ratio = 4;
        pp.overlap = true;
        IndexerScoresParams ip;
        ip.q = iq.data();
        ip.q_token_stride = HI * cI;
        ip.q_head_stride = cI;
        ip.weights = iw.data();
        ip.weights_token_stride = HI;
        ip.keys = key_cache.view();
        ip.key_format = CacheRecordFormat::fp8_row_scale;
        ip.n_slots = key_cache.n_slots();
        ip.tables = {key_table.data(), token_list.data(), 1, 2};
        ip.n_keys = n_keys.data();
        ip.scores = scores.data();
        ip.scores_row_stride = n;
        ip.n_tokens = n;
        ip.n_heads = HI;
        ip.head_dim = cI;
        ip.n_cols = n;
        SparseAttentionParams mp;  // DeepSeek-V4's layout: v_dim = qk_dim, the window as the main list
        mp.q = q.data();
        mp.q_token_stride = H * d;
        mp.q_head_stride = d;
        mp.main.cache = kv_cache.view();
        mp.main.format = CacheRecordFormat::fp8_model1;
        mp.main.n_slots = kv_cache.n_slots();
        mp.main.slots = window.data();
        mp.main.width = 3;
        mp.main.slots_stride = 3;
        mp.sink = sink.data();
        mp.scale = 0.04f;
        mp.out = out.data();
        mp.out_token_stride = H * d;
        mp.out_head_stride = d;
        mp.n_tokens = n;
        mp.n_heads = H;
        mp.qk_dim = mp.v_dim = d;
        mp.rope_dim = r;
        GuardedBuffer ws_i(b.indexer_scores_workspace_size(ip) + 64), ws_m(b.sparse_attention_workspace_size(mp) + 64);
        auto all = [&] {
            EXPECT_TRUE(b.cache_store(st).is_ok());
            EXPECT_TRUE(b.cache_store(kst).is_ok());
            EXPECT_TRUE(b.kv_load(ld).is_ok());
            EXPECT_TRUE(b.compressor_state_store(ss).is_ok());
            EXPECT_TRUE(b.compressor_pool(pp).is_ok());
            EXPECT_TRUE(b.indexer_scores(ip, Workspace{ws_i.data(), b.indexer_scores_workspace_size(ip)}).is_ok());
            EXPECT_TRUE(b.sparse_attention(mp, Workspace{ws_m.data(), b.sparse_attention_workspace_size(mp)}).is_ok());
        };
        all();  // warm-up (thread pool start)
        EXPECT_EQ(allocations_during(all), 0);
    }
}

}  // namespace
}  // namespace sieve::test

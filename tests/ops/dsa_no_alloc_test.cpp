// "run of an op allocates nothing" (DESIGN.md) for the DSA-on-MLA ops of every cpu backend variant:
// operator new is replaced by a counting version; the second run of each op must not allocate on any
// thread. (The ref backend, the oracle, may allocate.)
#include <functional>

#include "alloc_counter.h"
#include "paged_cache.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::test {
namespace {

TEST(DsaNoAllocation, EveryCpuDsaOpRunsWithoutAllocating) {
    Rng rng(79);
    const int64_t T = 5, H = 4, R = 64, Dr = 16, Hi = 4, Di = 32, K = 8, B = 16;
    for (const bool fp8 : {false, true}) {
        const auto lf = fp8 ? CacheRecordFormat::fp8_v32 : CacheRecordFormat::f32;
        const auto kf = fp8 ? CacheRecordFormat::fp8_row_scale : CacheRecordFormat::f32;
        const CacheRecordLayout ll{lf, R + Dr, Dr}, kl{kf, Di, 0};
        PagedTestCache latent(4, B, ll.entry_bytes()), keys(4, B, kl.entry_bytes());
        std::vector<float> c(static_cast<size_t>(T * (R + Dr))), k(static_cast<size_t>(T * Di));
        for (float& v : c) v = rng.normal();
        for (float& v : k) v = rng.normal();
        std::vector<int32_t> slots = {3, 17, 18, 40, 41};
        CacheStoreParams cw;
        cw.x = c.data();
        cw.slots = slots.data();
        cw.cache = latent.view();
        cw.layout = ll;
        cw.n_slots = latent.n_slots();
        cw.n_rows = T;
        cw.dim = R + Dr;
        cw.x_row_stride = R + Dr;
        CacheStoreParams kw;
        kw.x = k.data();
        kw.slots = slots.data();
        kw.cache = keys.view();
        kw.layout = kl;
        kw.n_slots = keys.n_slots();
        kw.n_rows = T;
        kw.dim = Di;
        kw.x_row_stride = Di;

        std::vector<float> q(static_cast<size_t>(T * H * (R + Dr))), out(static_cast<size_t>(T * H * R)), sink(H, 0.5f);
        for (float& v : q) v = rng.normal();
        std::vector<int32_t> sel(static_cast<size_t>(T * K), -1);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j <= t; ++j) sel[static_cast<size_t>(t * K + j)] = static_cast<int32_t>(slots[static_cast<size_t>(j)]);
        SparseAttentionParams ap;  // DSA on MLA's layout: K = [c | kr], V = c, one main list
        ap.q = q.data();
        ap.main.cache = latent.view();
        ap.main.format = lf;
        ap.main.n_slots = latent.n_slots();
        ap.main.slots = sel.data();
        ap.main.width = K;
        ap.main.slots_stride = K;
        ap.sink = sink.data();
        ap.out = out.data();
        ap.scale = 0.1f;
        ap.n_tokens = T;
        ap.n_heads = H;
        ap.qk_dim = R + Dr;
        ap.v_dim = R;
        ap.rope_dim = Dr;
        ap.q_token_stride = H * (R + Dr);
        ap.q_head_stride = R + Dr;
        ap.out_token_stride = H * R;
        ap.out_head_stride = R;

        std::vector<float> iq(static_cast<size_t>(T * Hi * Di)), w(static_cast<size_t>(T * Hi)), qs(static_cast<size_t>(T * Hi), 0.25f);
        std::vector<uint8_t> iq8(iq.size(), 0x38);
        for (float& v : iq) v = rng.normal();
        for (float& v : w) v = rng.normal();
        std::vector<float> scores(static_cast<size_t>(T * 48));
        const std::vector<int32_t> table = {2, 1, 0}, seq(static_cast<size_t>(T), 0), n_keys = {48, 20, 0, 33, 1};
        IndexerScoresParams sp;
        sp.q = fp8 ? static_cast<const void*>(iq8.data()) : iq.data();
        sp.q_type = fp8 ? DType::f8_e4m3 : DType::f32;
        sp.q_scale = fp8 ? qs.data() : nullptr;
        sp.q_scale_token_stride = Hi;
        sp.weights = w.data();
        sp.weights_token_stride = Hi;
        sp.weight_scale = 0.1f;
        sp.keys = keys.view();
        sp.key_format = kf;
        sp.n_slots = keys.n_slots();
        sp.tables = {table.data(), seq.data(), 1, 3};
        sp.n_keys = n_keys.data();
        sp.scores = scores.data();
        sp.n_tokens = T;
        sp.n_heads = Hi;
        sp.head_dim = Di;
        sp.n_cols = 48;
        sp.q_token_stride = Hi * Di;
        sp.q_head_stride = Di;
        sp.scores_row_stride = 48;

        std::vector<float> o(static_cast<size_t>(T * H * 16)), g(o.size());
        for (float& v : g) v = rng.normal();
        DsaOutputGateParams gp;
        gp.x = gp.y = o.data();
        gp.gate = g.data();
        gp.n_tokens = T;
        gp.n_heads = H;
        gp.head_dim = 16;
        gp.x_token_stride = gp.y_token_stride = gp.gate_row_stride = H * 16;
        gp.x_head_stride = gp.y_head_stride = 16;

        std::vector<uint16_t> wuv(static_cast<size_t>(H * R * 16), f32_to_bf16(0.01f));
        MlaHeadProjParams hp;
        hp.x = out.data();
        hp.w = wuv.data();
        hp.y = o.data();
        hp.n_tokens = T;
        hp.n_heads = H;
        hp.in_features = R;
        hp.out_features = 16;
        hp.x_token_stride = H * R;
        hp.x_head_stride = R;
        hp.y_token_stride = H * 16;
        hp.y_head_stride = 16;
        hp.math = LinearMath::bf16;
        hp.w_type = DType::bf16;

        for (auto& nb : host_backends_under_test()) {
            SCOPED_TRACE(fmt::format("{} fp8 {}", nb.spec, fp8));
            Backend& b = *nb.backend;
            std::vector<uint8_t> ws_a(b.sparse_attention_workspace_size(ap) + 64);
            std::vector<uint8_t> ws_s(b.indexer_scores_workspace_size(sp) + 64);
            std::vector<uint8_t> ws_h(b.mla_head_proj_workspace_size(hp) + 64);
            auto aligned = [](std::vector<uint8_t>& v, size_t n) {
                return Workspace{v.data() + (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64, n};
            };
            const Workspace wa = aligned(ws_a, b.sparse_attention_workspace_size(ap));
            const Workspace wsc = aligned(ws_s, b.indexer_scores_workspace_size(sp));
            const Workspace wh = aligned(ws_h, b.mla_head_proj_workspace_size(hp));
            const std::vector<std::pair<const char*, std::function<Status()>>> ops = {
                {"cache_store (latent)", [&] { return b.cache_store(cw); }},
                {"sparse_attention", [&] { return b.sparse_attention(ap, wa); }},
                {"cache_store (indexer keys)", [&] { return b.cache_store(kw); }},
                {"indexer_scores", [&] { return b.indexer_scores(sp, wsc); }},
                {"dsa_output_gate", [&] { return b.dsa_output_gate(gp); }},
                {"mla_head_proj", [&] { return b.mla_head_proj(hp, wh); }},
            };
            for (const auto& op : ops) {  // (no structured binding: clang 14 cannot capture one)
                const char* name = op.first;
                const std::function<Status()>& run = op.second;
                ASSERT_TRUE(run().is_ok()) << name;  // warm-up (thread pool, lazy state)
                Status st;
                const int64_t n = allocations_during([&] { st = run(); });
                ASSERT_TRUE(st.is_ok()) << name << ": " << st.to_string();
                EXPECT_EQ(n, 0) << name << " allocated " << n << " times";
            }
        }
    }
}

}  // namespace
}  // namespace sieve::test

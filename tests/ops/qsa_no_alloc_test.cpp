// "run of an op allocates nothing" (DESIGN.md) for the QSA ops of every cpu backend variant:
// operator new is replaced by a counting version; the second run of each op must not allocate on
// any thread. (The ref backend, the oracle, may allocate.)
#include <functional>

#include "alloc_counter.h"
#include "paged_cache.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::test {
namespace {

TEST(QsaNoAllocation, EveryCpuQsaOpRunsWithoutAllocating) {
    Rng rng(77);
    const int64_t T = 6, Hq = 8, Hkv = 2, D = 64, Hi = 4, Di = 32, r = 4, k = 3, W = k * r + r - 1;
    std::vector<int32_t> token_request = {0, 0, 0, 1, 1, 1};
    std::vector<int64_t> positions = {37, 38, 39, 2, 3, 4}, seq_lens = {40, 40, 40, 5, 5, 5};
    PagedTestCache kv(rng, {40, 5}, 16, 2 * Hkv * D * 4), comp(rng, {10, 1}, 4, Di * 4), ring(rng, {40, 5}, 4, Di * 4);
    kv.fill(DType::f32, 2 * Hkv * D, [&] { return rng.normal(); });
    comp.fill(DType::f32, Di, [&] { return rng.normal(); });
    ring.fill(DType::f32, Di, [&] { return rng.normal(); });
    std::vector<float> q(static_cast<size_t>(T * Hq * D)), iq(static_cast<size_t>(T * Hi * Di)), out(q.size()),
        scores(static_cast<size_t>(T * 10)), pooled(static_cast<size_t>(2 * Di));
    for (float& v : q) v = rng.normal();
    for (float& v : iq) v = rng.normal();
    std::vector<int32_t> n_groups = {10, 10, 10, 0, 0, 0}, sel(static_cast<size_t>(T * k)), idx(static_cast<size_t>(T * W));
    std::vector<int64_t> slots = {ring.slot(0, 36), ring.slot(0, 37), ring.slot(0, 38), ring.slot(0, 39),
                                  ring.slot(1, 0),  ring.slot(1, 1),  ring.slot(1, 2),  ring.slot(1, 3)};
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) sel[static_cast<size_t>(t * k + j)] = t < 3 ? static_cast<int32_t>(2 * j + 1) : -1;

    QsaPoolParams pp;
    pp.keys = ring.view();
    pp.member_slots = slots.data();
    pp.out = pooled.data();
    pp.n_groups = 2;
    pp.ratio = r;
    pp.head_dim = Di;
    pp.out_row_stride = Di;
    IndexerScoresParams sp;  // QSA's scores: no head weights
    sp.q = iq.data();
    sp.keys = comp.view();
    sp.n_slots = comp.n_slots();
    sp.tables = comp.tables(token_request);
    sp.n_keys = n_groups.data();
    sp.scores = scores.data();
    sp.n_tokens = T;
    sp.n_heads = Hi;
    sp.head_dim = Di;
    sp.q_token_stride = Hi * Di;
    sp.q_head_stride = Di;
    sp.n_cols = 10;
    sp.scores_row_stride = 10;
    QsaExpandParams ep;
    ep.sel = sel.data();
    ep.positions = positions.data();
    ep.seq_lens = seq_lens.data();
    ep.out = idx.data();
    ep.n_tokens = T;
    ep.ratio = r;
    ep.block_topk = k;
    ep.out_width = W;
    ep.sel_row_stride = k;
    ep.out_row_stride = W;
    QsaSparseGqaParams gp;
    gp.q = q.data();
    gp.kv = kv.view();
    gp.tables = kv.tables(token_request);
    gp.indices = idx.data();
    gp.gate = q.data();
    gp.out = out.data();
    gp.n_tokens = T;
    gp.n_heads = Hq;
    gp.n_kv_heads = Hkv;
    gp.head_dim = D;
    gp.n_indices = W;
    gp.index_row_stride = W;
    gp.q_token_stride = gp.gate_token_stride = gp.out_token_stride = Hq * D;
    gp.q_head_stride = gp.gate_head_stride = gp.out_head_stride = D;
    gp.scale = 0.125f;

    for (auto& nb : host_backends_under_test()) {
        SCOPED_TRACE(nb.spec);
        Backend& b = *nb.backend;
        ASSERT_TRUE(b.qsa_expand(ep).is_ok());  // the attention below reads these rows
        GuardedBuffer ws(std::max<size_t>(b.qsa_sparse_gqa_workspace_size(gp), 1));
        IndexerScoresParams fused = sp;  // the fused selection, without score rows (its own output: expand reads sel)
        std::vector<int32_t> fused_sel(sel.size());
        fused.scores = nullptr;
        fused.selected = fused_sel.data();
        fused.k = k;
        fused.selected_row_stride = k;
        const size_t score_ws = b.indexer_scores_workspace_size(sp), fused_ws = b.indexer_scores_workspace_size(fused);
        GuardedBuffer sws(std::max<size_t>(std::max(score_ws, fused_ws), 1));
        bool all_ok = true;
        const std::vector<std::pair<std::string, std::function<void()>>> ops = {
            {"qsa_pool", [&] { all_ok &= b.qsa_pool(pp).is_ok(); }},
            {"indexer_scores", [&] { all_ok &= b.indexer_scores(sp, {sws.data(), score_ws}).is_ok(); }},
            {"indexer_scores fused", [&] { all_ok &= b.indexer_scores(fused, {sws.data(), fused_ws}).is_ok(); }},
            {"qsa_expand", [&] { all_ok &= b.qsa_expand(ep).is_ok(); }},
            {"qsa_sparse_gqa",
             [&] { all_ok &= b.qsa_sparse_gqa(gp, {ws.data(), b.qsa_sparse_gqa_workspace_size(gp)}).is_ok(); }},
        };
        for (auto& [name, fn] : ops) {
            fn();  // warm-up
            EXPECT_EQ(allocations_during(fn), 0) << name;
        }
        EXPECT_TRUE(all_ok);
    }
}

TEST(QsaNoAllocation, CounterSeesAllocations) {  // the check itself can fail
    // Through a volatile pointer: a new/delete pair the compiler can see whole may be elided.
    static std::vector<int>* volatile escaped = nullptr;
    EXPECT_GE(allocations_during([] {
                  escaped = new std::vector<int>(100);
                  delete escaped;
              }),
              2);
}

}  // namespace
}  // namespace sieve::test

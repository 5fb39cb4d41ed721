// validate() of the QSA op contracts: malformed params are refused with a message naming the field
// and the values, by the contract and therefore by every backend.
#include "paged_cache.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::test {
namespace {

void expect_invalid(const Status& s, const std::string& needle) {
    EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message() << "\n  lacks: " << needle;
}

// A content error: validate (which reads no array) accepts; check_indices, and so the host check
// the ref and cpu backends run, refuse.
template <class P>
void expect_invalid_indices(const P& p, const std::string& needle) {
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    expect_invalid(check_indices(p), needle);
    expect_invalid(validate_and_check_indices(p), needle);
}

TEST(QsaValidate, Pool) {
    Rng rng(1);
    PagedTestCache cache(rng, {8}, 4, 16 * 4);
    std::vector<int64_t> slots = {cache.slot(0, 0), cache.slot(0, 1), -1, cache.slot(0, 3)};
    std::vector<float> out(16);
    QsaPoolParams p;
    p.keys = cache.view();
    p.member_slots = slots.data();
    p.out = out.data();
    p.n_groups = 1;
    p.ratio = 4;
    p.head_dim = 16;
    p.out_row_stride = 16;
    expect_invalid_indices(p, "member_slots[0, 2] = -1");
    slots[2] = cache.slot(0, 2);
    EXPECT_TRUE(validate(p).is_ok());
    p.head_dim = 17;  // a key row longer than the cache entry
    expect_invalid(validate(p), "cache entry of 64 bytes, the op reads 68");
    p.head_dim = 16;
    p.ratio = 0;
    expect_invalid(validate(p), "ratio = 0");
}

TEST(QsaValidate, Expand) {
    std::vector<int32_t> sel = {5, -1};
    std::vector<int64_t> pos = {19}, len = {20};
    std::vector<int32_t> out(11);
    QsaExpandParams p;
    p.sel = sel.data();
    p.positions = pos.data();
    p.seq_lens = len.data();
    p.out = out.data();
    p.n_tokens = 1;
    p.ratio = 4;
    p.block_topk = 2;
    p.out_width = 11;
    p.sel_row_stride = 2;
    p.out_row_stride = 11;
    expect_invalid_indices(p, "sel[0, 0] = 5");  // visible = 5: groups 0..4
    expect_invalid(ref_backend()->qsa_expand(p), "sel[0, 0] = 5");  // the host backends run check_indices
    for (auto& nb : backends_under_test()) {
        if (nb.spec.starts_with("cuda")) continue;  // a GPU's kernels skip such an entry (backend.h)
        expect_invalid(nb.backend->qsa_expand(p), "sel[0, 0] = 5");
    }
    sel = {4, -1};
    p.sel = sel.data();
    EXPECT_TRUE(validate(p).is_ok());
    sel = {-1, 3};  // a group after the padding
    p.sel = sel.data();
    expect_invalid_indices(p, "sel[0, 1] = 3");
    p.out_width = 10;
    expect_invalid(validate(p), "out_width = 10 < block_topk·ratio + ratio − 1");
    p.out_width = 11;
    pos = {20};
    p.positions = pos.data();
    expect_invalid_indices(p, "position 20 with seq_len 20");
}

// (The scores' residency checks are indexer_scores_test.cpp's.)
TEST(QsaValidate, AttentionNeedsResidentEntries) {
    Rng rng(2);
    PagedTestCache kv(rng, {10}, 4, 2 * 2 * 8 * 4);
    std::vector<int32_t> tr = {0};
    std::vector<int32_t> idx = {0, 9, -1};
    std::vector<float> qa(3 * 8), out(3 * 8);
    QsaSparseGqaParams a;
    a.q = qa.data();
    a.kv = kv.view();
    a.tables = kv.tables(tr);
    a.indices = idx.data();
    a.out = out.data();
    a.n_tokens = 1;
    a.n_heads = 3;
    a.n_kv_heads = 2;
    a.head_dim = 8;
    a.n_indices = 3;
    a.index_row_stride = 3;
    a.q_token_stride = a.out_token_stride = 24;
    a.q_head_stride = a.out_head_stride = 8;
    expect_invalid(validate(a), "n_heads = 3 is not a multiple of n_kv_heads = 2");
    a.n_heads = 4;
    std::vector<float> qb(4 * 8), ob(4 * 8);
    a.q = qb.data();
    a.out = ob.data();
    a.q_token_stride = a.out_token_stride = 32;
    EXPECT_TRUE(validate(a).is_ok());
    idx[1] = 12;  // past the request's 10 entries (3 blocks of 4)
    expect_invalid_indices(a, "reads entries [0, 13) = 4 blocks of 4");
    idx[1] = -2;
    expect_invalid_indices(a, "indices[0, 1] = -2");
    idx[1] = 9;
    tr[0] = 1;
    expect_invalid_indices(a, "tables.token_request[0] = 1");
    tr[0] = 0;
    a.out = qb.data();  // out aliasing q
    expect_invalid(validate(a), "overlap");
}

}  // namespace
}  // namespace sieve::test

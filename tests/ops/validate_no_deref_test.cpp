// validate() never reads memory behind the params' pointers: for every op, a valid params struct
// stays valid when each of its index arrays (block tables, slot lists, top-k rows, lengths,
// positions) points at a page that cannot be read, so validate() can run on params whose arrays live
// in device memory. A read would end the test with SIGSEGV. Ops without index arrays get the same
// treatment for their read-only inputs. Each case first checks that the params are valid with
// their real arrays (validate_and_check_indices), so that an early return cannot pass for "ok".
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include "paged_cache.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/linear.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve::test {
namespace {

// One page of address space that faults on any access (mmap, then mprotect PROT_NONE).
class InaccessiblePage {
public:
    InaccessiblePage() : bytes_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
        base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base_ == MAP_FAILED || mprotect(base_, bytes_, PROT_NONE) != 0) std::abort();
    }
    ~InaccessiblePage() { munmap(base_, bytes_); }
    InaccessiblePage(const InaccessiblePage&) = delete;
    InaccessiblePage& operator=(const InaccessiblePage&) = delete;

    template <class T>
    T* as() const {
        return static_cast<T*>(base_);
    }

private:
    size_t bytes_;
    void* base_ = nullptr;
};

const InaccessiblePage& page() {
    static const InaccessiblePage p;
    return p;
}
const int32_t* i32_page() { return page().as<const int32_t>(); }
const int64_t* i64_page() { return page().as<const int64_t>(); }

// p is valid with its real arrays; `hide` points its arrays at the page; validate(p) still accepts.
template <class P, class Hide>
void expect_valid_unread(P p, Hide&& hide) {
    const Status full = validate_and_check_indices(p);
    ASSERT_TRUE(full.is_ok()) << "the params are not valid to begin with: " << full.to_string();
    hide(p);
    const Status st = validate(p);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
}

TEST(ValidateNoDeref, Topk) {
    std::vector<float> s(40);
    std::vector<int32_t> out(12), valid = {3, 11}, count(2);
    TopkParams p;
    p.scores = s.data();
    p.valid_len = valid.data();
    p.out = out.data();
    p.out_count = count.data();
    p.n_rows = 2;
    p.n_cols = 20;
    p.k = 6;
    p.scores_row_stride = 20;
    p.out_row_stride = 6;
    expect_valid_unread(p, [](TopkParams& q) { q.valid_len = i32_page(); });
}

TEST(ValidateNoDeref, Rope) {
    std::vector<float> x(32), y(32), f(4);
    const int64_t pos[2] = {0, 1};
    RopeParams p;
    p.x = x.data();
    p.y = y.data();
    p.positions = pos;
    p.inv_freq = f.data();
    p.n_tokens = 2;
    p.head_dim = 16;
    p.rot_dim = 8;
    p.x_token_stride = p.y_token_stride = 16;
    p.x_head_stride = p.y_head_stride = 16;
    expect_valid_unread(p, [](RopeParams& q) { q.positions = i64_page(); });
    p.positions_type = DType::i32;
    const int32_t pos32[2] = {0, 1};
    p.positions = pos32;
    expect_valid_unread(p, [](RopeParams& q) { q.positions = i32_page(); });
}

TEST(ValidateNoDeref, CacheStoreAndKvLoad) {
    for (const CacheRecordLayout l :
         {CacheRecordLayout{CacheRecordFormat::f32, 8, 0}, CacheRecordLayout{CacheRecordFormat::bf16, 24, 0},
          CacheRecordLayout{CacheRecordFormat::fp8_row_scale, 16, 0}, CacheRecordLayout{CacheRecordFormat::fp8_model1, 72, 8},
          CacheRecordLayout{CacheRecordFormat::fp8_v32, 40, 8}}) {
        SCOPED_TRACE(std::string(cache_record_format_name(l.format)));
        PagedTestCache cache(2, 4, l.entry_bytes(), 64);
        std::vector<float> x(2 * 72), y(2 * 72);
        std::vector<int32_t> slots = {0, 5};
        CacheStoreParams s;
        s.x = x.data();
        s.slots = slots.data();
        s.cache = cache.view();
        s.layout = l;
        s.n_slots = cache.n_slots();
        s.n_rows = 2;
        s.dim = l.dim;
        s.x_row_stride = l.dim;
        expect_valid_unread(s, [](CacheStoreParams& q) { q.slots = i32_page(); });
        if (!l.is_fp8()) {  // a sub-row of the entry
            s.dim = 5;
            s.entry_offset = 3;
            expect_valid_unread(s, [](CacheStoreParams& q) { q.slots = i32_page(); });
        }
        KvLoadParams ld;
        ld.cache = cache.view();
        ld.layout = l;
        ld.slots = slots.data();
        ld.y = y.data();
        ld.n_rows = 2;
        ld.y_row_stride = l.dim;
        expect_valid_unread(ld, [](KvLoadParams& q) { q.slots = i32_page(); });
    }
}

TEST(ValidateNoDeref, Compressor) {
    PagedTestCache state(2, 4, 8 * 8, 64);
    float kv[16] = {}, gate[16] = {}, ape[32] = {};
    const int64_t positions[2] = {0, 1};
    const int32_t slots[2] = {0, 1};
    CompressorStateStoreParams s;
    s.kv = kv;
    s.gate = gate;
    s.ape = ape;
    s.positions = positions;
    s.slots = slots;
    s.state = state.view();
    s.n_tokens = 2;
    s.width = 8;
    s.ratio = 4;
    s.kv_row_stride = s.gate_row_stride = 8;
    expect_valid_unread(s, [](CompressorStateStoreParams& q) {
        q.positions = i64_page();
        q.slots = i32_page();
    });

    const int32_t gather[16] = {-1, -1, -1, -1, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7};
    float out[8];
    CompressorPoolParams p;
    p.state = state.view();
    p.gather_slots = gather;
    p.out = out;
    p.n_entries = 2;
    p.head_dim = 4;
    p.ratio = 4;
    p.overlap = true;
    p.gather_stride = 8;
    p.out_row_stride = 4;
    expect_valid_unread(p, [](CompressorPoolParams& q) { q.gather_slots = i32_page(); });
}

TEST(ValidateNoDeref, IndexerScores) {
    Rng rng(3);
    const CacheRecordLayout kl{CacheRecordFormat::fp8_row_scale, 16, 0};
    PagedTestCache keys(rng, {40}, 16, kl.entry_bytes());
    std::vector<int32_t> token_request = {0, 0}, n_keys = {40, 0}, selected(2 * 4);
    std::vector<uint8_t> q(2 * 4 * 16);
    std::vector<float> q_scale(2 * 4, 1.0f), weights(2 * 4, 1.0f), scores(2 * 64);
    IndexerScoresParams p;
    p.q = q.data();
    p.q_type = DType::f8_e4m3;
    p.q_scale = q_scale.data();
    p.q_scale_token_stride = 4;
    p.weights = weights.data();
    p.weights_token_stride = 4;
    p.keys = keys.view();
    p.key_format = kl.format;
    p.n_slots = keys.n_slots();
    p.tables = keys.tables(token_request);
    p.n_keys = n_keys.data();
    p.scores = scores.data();
    p.n_tokens = 2;
    p.n_heads = 4;
    p.head_dim = 16;
    p.q_token_stride = 64;
    p.q_head_stride = 16;
    p.n_cols = 64;
    p.scores_row_stride = 64;
    auto hide = [](IndexerScoresParams& r) {
        r.tables.block_table = i32_page();
        r.tables.token_request = i32_page();
        r.n_keys = i32_page();
    };
    expect_valid_unread(p, hide);
    p.selected = selected.data();  // fused selection, with and without score rows
    p.k = 4;
    p.selected_row_stride = 4;
    expect_valid_unread(p, hide);
    p.scores = nullptr;
    expect_valid_unread(p, hide);
    p.weights = nullptr;  // QSA: no head weights, bf16 q
    p.q_type = DType::bf16;
    p.q_scale = nullptr;
    expect_valid_unread(p, hide);
}

// DeepSeek-V4's layout (ops/sparse_attention.h): v_dim = qk_dim, a main and an extra list of two formats.
TEST(ValidateNoDeref, SparseAttentionMqaLayout) {
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 32, 8};
    PagedTestCache window(2, 2, l.entry_bytes(), 64), compressed(1, 4, 4 * 32, 64);
    float q[64] = {}, out[64], sink[1] = {0};
    int32_t window_slots[4] = {0, -1, 1, 2}, compressed_slots[6] = {0, 1, -1, 2, 3, -1};
    SparseAttentionParams p;
    p.q = q;
    p.out = out;
    p.sink = sink;
    p.scale = 1.0f;
    p.main.cache = window.view();
    p.main.format = CacheRecordFormat::fp8_model1;
    p.main.n_slots = window.n_slots();
    p.main.slots = window_slots;
    p.main.width = 2;
    p.main.slots_stride = 2;
    p.extra.cache = compressed.view();
    p.extra.format = CacheRecordFormat::f32;
    p.extra.n_slots = compressed.n_slots();
    p.extra.slots = compressed_slots;
    p.extra.width = 3;
    p.extra.slots_stride = 3;
    p.n_tokens = 2;
    p.n_heads = 1;
    p.qk_dim = p.v_dim = 32;
    p.rope_dim = 8;
    p.q_token_stride = p.out_token_stride = 32;
    expect_valid_unread(p, [](SparseAttentionParams& r) {
        r.main.slots = i32_page();
        r.extra.slots = i32_page();
    });
}

// DSA on MLA's layout (ops/sparse_attention.h): K = [c | kr], V = c, one main list.
TEST(ValidateNoDeref, SparseAttentionMlaLayout) {
    PagedTestCache cache(2, 4, CacheRecordLayout{CacheRecordFormat::f32, 8 + 2}.entry_bytes());
    std::vector<float> q(2 * 10, 0.0f), out(2 * 8, 0.0f), sink(1, 0.0f);
    std::vector<int32_t> slots = {0, 7, -1, 3};
    SparseAttentionParams p;
    p.q = q.data();
    p.main.cache = cache.view();
    p.main.n_slots = cache.n_slots();
    p.main.slots = slots.data();
    p.main.width = 2;
    p.main.slots_stride = 2;
    p.sink = sink.data();
    p.out = out.data();
    p.scale = 0.5f;
    p.n_tokens = 2;
    p.n_heads = 1;
    p.qk_dim = 8 + 2;
    p.v_dim = 8;
    p.rope_dim = 2;
    p.q_token_stride = 10;
    p.q_head_stride = 10;
    p.out_token_stride = 8;
    p.out_head_stride = 8;
    expect_valid_unread(p, [](SparseAttentionParams& r) { r.main.slots = i32_page(); });
}

TEST(ValidateNoDeref, QsaPoolAndExpand) {
    Rng rng(1);
    PagedTestCache cache(rng, {8}, 4, 16 * 4);
    std::vector<int64_t> slots = {cache.slot(0, 0), cache.slot(0, 1), cache.slot(0, 2), cache.slot(0, 3)};
    std::vector<float> pooled(16);
    QsaPoolParams pool;
    pool.keys = cache.view();
    pool.member_slots = slots.data();
    pool.out = pooled.data();
    pool.n_groups = 1;
    pool.ratio = 4;
    pool.head_dim = 16;
    pool.out_row_stride = 16;
    expect_valid_unread(pool, [](QsaPoolParams& r) { r.member_slots = i64_page(); });

    std::vector<int32_t> sel = {4, -1, 0, 1}, out(2 * 11), count(2);
    std::vector<int64_t> pos = {19, 3}, len = {20, 20};
    QsaExpandParams e;
    e.sel = sel.data();
    e.positions = pos.data();
    e.seq_lens = len.data();
    e.out = out.data();
    e.out_count = count.data();
    e.n_tokens = 2;
    e.ratio = 4;
    e.block_topk = 2;
    e.out_width = 11;
    e.sel_row_stride = 2;
    e.out_row_stride = 11;
    expect_valid_unread(e, [](QsaExpandParams& r) {
        r.sel = i32_page();
        r.positions = i64_page();
        r.seq_lens = i64_page();
    });
}

TEST(ValidateNoDeref, SelectedSlots) {
    std::vector<int32_t> selected = {1, 0, -1, 2}, n_scored = {3, 0}, token_request = {0, 0}, table = {2, 0}, slots(4);
    std::vector<int64_t> pos = {11, 7};
    SelectedSlotsParams p;
    p.selected = selected.data();
    p.n_scored = n_scored.data();
    p.positions = pos.data();
    p.tables = {table.data(), token_request.data(), 1, 2};
    p.slots = slots.data();
    p.n_tokens = 2;
    p.width = 2;
    p.ratio = 4;
    p.block_size = 2;
    p.n_slots = 6;
    p.selected_row_stride = 2;
    p.slots_row_stride = 2;
    expect_valid_unread(p, [](SelectedSlotsParams& r) {
        r.selected = i32_page();
        r.n_scored = i32_page();
        r.positions = i64_page();
        r.tables.block_table = i32_page();
        r.tables.token_request = i32_page();
    });
}

TEST(ValidateNoDeref, QsaSparseGqa) {
    Rng rng(2);
    PagedTestCache kv(rng, {10}, 4, 2 * 2 * 8 * 4);
    std::vector<int32_t> tr = {0};
    std::vector<int32_t> idx = {0, 9, -1};
    std::vector<float> qa(4 * 8), gate(4 * 8), out(4 * 8);
    QsaSparseGqaParams a;
    a.q = qa.data();
    a.kv = kv.view();
    a.tables = kv.tables(tr);
    a.indices = idx.data();
    a.gate = gate.data();
    a.out = out.data();
    a.n_tokens = 1;
    a.n_heads = 4;
    a.n_kv_heads = 2;
    a.head_dim = 8;
    a.n_indices = 3;
    a.index_row_stride = 3;
    a.q_token_stride = a.gate_token_stride = a.out_token_stride = 32;
    a.q_head_stride = a.gate_head_stride = a.out_head_stride = 8;
    expect_valid_unread(a, [](QsaSparseGqaParams& r) {
        r.tables.block_table = i32_page();
        r.tables.token_request = i32_page();
        r.indices = i32_page();
    });
}

// No index arrays: the read-only inputs point at the page instead (the outputs stay real, so that
// the overlap checks see distinct buffers).
TEST(ValidateNoDeref, OpsWithoutIndexArrays) {
    const float* f32_page = page().as<const float>();
    std::vector<float> x(64), y(64), w(64);
    RmsNormParams rms;
    rms.x = x.data();
    rms.y = y.data();
    rms.weight = w.data();
    rms.n_tokens = 2;
    rms.n_heads = 2;
    rms.dim = 8;
    rms.x_token_stride = rms.y_token_stride = 16;
    rms.x_head_stride = rms.y_head_stride = 8;
    expect_valid_unread(rms, [&](RmsNormParams& r) {
        r.x = f32_page;
        r.weight = f32_page;
    });

    LayerNormParams ln;
    ln.x = x.data();
    ln.y = y.data();
    ln.weight = w.data();
    ln.bias = w.data();
    ln.n_tokens = 4;
    ln.dim = 16;
    ln.x_token_stride = ln.y_token_stride = 16;
    expect_valid_unread(ln, [&](LayerNormParams& r) {
        r.x = f32_page;
        r.weight = f32_page;
        r.bias = f32_page;
    });

    HadamardParams h;
    h.x = x.data();
    h.y = y.data();
    h.n_tokens = 2;
    h.dim = 32;
    h.x_token_stride = h.y_token_stride = 32;
    expect_valid_unread(h, [&](HadamardParams& r) { r.x = f32_page; });

    std::vector<uint8_t> q8(64), scale(2);
    QuantFp8Params qp;
    qp.x = x.data();
    qp.q = q8.data();
    qp.scale_ue8m0 = scale.data();
    qp.dequant = y.data();
    qp.n_tokens = 2;
    qp.dim = 32;
    qp.group_size = 32;
    qp.x_token_stride = qp.q_token_stride = qp.dequant_token_stride = 32;
    qp.scale_token_stride = 1;
    expect_valid_unread(qp, [&](QuantFp8Params& r) { r.x = f32_page; });

    DsaOutputGateParams g;
    g.x = x.data();
    g.gate = w.data();
    g.y = y.data();
    g.n_tokens = 2;
    g.n_heads = 2;
    g.head_dim = 8;
    g.x_token_stride = g.y_token_stride = 16;
    g.x_head_stride = g.y_head_stride = 8;
    g.gate_row_stride = 16;
    expect_valid_unread(g, [&](DsaOutputGateParams& r) {
        r.x = f32_page;
        r.gate = f32_page;
    });

    MlaHeadProjParams m;
    m.x = x.data();
    m.w = w.data();
    m.y = y.data();
    m.n_tokens = 2;
    m.n_heads = 2;
    m.in_features = 4;
    m.out_features = 8;
    m.x_token_stride = 8;
    m.x_head_stride = 4;
    m.y_token_stride = 16;
    m.y_head_stride = 8;
    expect_valid_unread(m, [&](MlaHeadProjParams& r) {
        r.x = f32_page;
        r.w = f32_page;
    });

    LinearWeights lw;
    lw.weight = w.data();
    lw.bias = w.data();
    lw.out_features = 8;
    lw.in_features = 8;
    lw.weight_row_stride = 8;
    expect_valid_unread(lw, [&](LinearWeights& r) {
        r.weight = f32_page;
        r.bias = f32_page;
    });
    LinearParams lp;
    lp.x = x.data();
    lp.y = y.data();
    lp.n_tokens = 4;
    lp.x_row_stride = 8;
    lp.y_row_stride = 8;
    ASSERT_TRUE(validate_and_check_indices(lp, int64_t{8}, int64_t{8}).is_ok());
    lp.x = f32_page;
    EXPECT_TRUE(validate(lp, 8, 8).is_ok());
}

}  // namespace
}  // namespace sieve::test

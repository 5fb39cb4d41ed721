// Conformance of QSA's sparse gated GQA (ops/qsa_sparse_gqa.h): every backend against ref over head
// groupings, head dims, index rows (−1 anywhere, empty rows, the whole context), dtypes, gate or
// none, both math modes, strides; ref against a softmax written out by hand.
#include "paged_cache.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::test {
namespace {

struct GqaCase {
    int64_t n_tokens, n_heads, n_kv_heads, head_dim, n_indices, block_size;
    DType q_type, kv_type, out_type;
    AttentionMath math;
    bool gate, padded;
};

struct GqaSetup {
    GqaCase c;
    RowsTensor q, gate;
    std::unique_ptr<PagedTestCache> kv;
    std::vector<int32_t> token_request, indices;
    int64_t index_stride = 0;
    RowsLayout out_layout;
    GqaSetup(Rng& rng, const GqaCase& gc)
        : c(gc),
          q(make_rows_layout(rng, gc.n_tokens, gc.n_heads, gc.head_dim, gc.padded), gc.q_type),
          gate(make_rows_layout(rng, gc.n_tokens, gc.n_heads, gc.head_dim, gc.padded), gc.q_type) {
        q.fill([&] { return rng.normal(1.0f); });
        gate.fill([&] { return rng.normal(2.0f); });
        const int64_t n_requests = rng.integer(1, 3);
        std::vector<int64_t> lens(static_cast<size_t>(n_requests));
        for (auto& l : lens) l = rng.integer(1, 300);
        kv = std::make_unique<PagedTestCache>(rng, lens, gc.block_size,
                                             2 * gc.n_kv_heads * gc.head_dim * static_cast<int64_t>(dtype_size(gc.kv_type)),
                                             gc.padded ? 64 : 0);
        kv->fill(gc.kv_type, 2 * gc.n_kv_heads * gc.head_dim, [&] { return rng.normal(1.5f); });
        index_stride = gc.n_indices + (gc.padded ? 3 : 0);
        indices.assign(static_cast<size_t>(std::max<int64_t>(1, gc.n_tokens * index_stride)), -1);
        for (int64_t t = 0; t < gc.n_tokens; ++t) {
            const int32_t qr = static_cast<int32_t>(rng.integer(0, n_requests - 1));
            token_request.push_back(qr);
            const int64_t L = lens[static_cast<size_t>(qr)];
            std::vector<int32_t> pos(static_cast<size_t>(L));
            std::iota(pos.begin(), pos.end(), 0);
            std::shuffle(pos.begin(), pos.end(), rng.engine());
            const int64_t mode = rng.integer(0, 4);  // empty row, a few, full width, scattered −1
            int64_t n = mode == 0 ? 0 : mode == 1 ? rng.integer(1, 4) : gc.n_indices;
            n = std::min(n, L);
            for (int64_t j = 0; j < n; ++j) {
                int64_t col = j;
                if (mode == 3) col = rng.integer(0, gc.n_indices - 1);  // may overwrite: some −1 stay between
                indices[static_cast<size_t>(t * index_stride + col)] = pos[static_cast<size_t>(j)];
            }
        }
        out_layout = make_rows_layout(rng, gc.n_tokens, gc.n_heads, gc.head_dim, gc.padded);
    }
    QsaSparseGqaParams params(void* out) const {
        QsaSparseGqaParams p;
        p.q = q.data();
        p.kv = kv->view();
        p.tables = kv->tables(token_request);
        p.indices = indices.data();
        p.gate = c.gate ? gate.data() : nullptr;
        p.out = out;
        p.n_tokens = c.n_tokens;
        p.n_heads = c.n_heads;
        p.n_kv_heads = c.n_kv_heads;
        p.head_dim = c.head_dim;
        p.n_indices = c.n_indices;
        p.index_row_stride = index_stride;
        p.q_token_stride = q.l.token_stride;
        p.q_head_stride = q.l.head_stride;
        p.gate_token_stride = gate.l.token_stride;
        p.gate_head_stride = gate.l.head_stride;
        p.out_token_stride = out_layout.token_stride;
        p.out_head_stride = out_layout.head_stride;
        p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        p.math = c.math;
        p.q_type = c.q_type;
        p.kv_type = c.kv_type;
        p.gate_type = c.q_type;
        p.out_type = c.out_type;
        return p;
    }
    // Tolerance of output (t, h, i) for backend vs ref (double). f32 math: the logits carry the dot
    // error Δl ≤ scale·γ_{D+1}·Σ|q·K|, which moves o by at most 2·Δl·max|V| (∂o/∂l_j = w_j(V_j − o));
    // exp (≈ 2 ulp each), the fp32 P·V and Σp sums (γ_{n+1} each) and the final scaling add
    // (γ_{2n+2} + 8u)·max|V|; the gate adds a few ulps of |y|. bf16 math: P = bf16(p) may round the
    // other way on one side (2^-8 relative per weight), and bf16(o), bf16(σ) and the product may each
    // straddle a rounding boundary: one bf16 ulp of |o| each.
    double tolerance(int64_t t, int64_t h) const {
        const int64_t g = h / (c.n_heads / c.n_kv_heads), D = c.head_dim;
        const double scale = 1.0 / std::sqrt(static_cast<double>(D));
        double max_v = 0, dl = 0;
        int64_t n = 0;
        for (int64_t j = 0; j < c.n_indices; ++j) {
            const int32_t pos = indices[static_cast<size_t>(t * index_stride + j)];
            if (pos < 0) continue;
            ++n;
            const uint8_t* e = const_cast<PagedTestCache&>(*kv).entry(token_request[static_cast<size_t>(t)], pos);
            double sabs = 0;
            for (int64_t i = 0; i < D; ++i) {
                sabs += std::fabs(static_cast<double>(q.get(t, h, i)) * load_as_f32(e, c.kv_type, 2 * g * D + i));
                max_v = std::max(max_v, std::fabs(static_cast<double>(load_as_f32(e, c.kv_type, (2 * g + 1) * D + i))));
            }
            dl = std::max(dl, scale * gamma_n(static_cast<double>(D) + 1.0) * sabs + 2 * kU * scale * sabs);
        }
        double tol = (2.0 * dl + gamma_n(2.0 * static_cast<double>(n) + 2.0) + 8.0 * kU) * max_v;
        tol += 8.0 * kU * max_v;  // gate: σ and the product
        if (c.math == AttentionMath::bf16) tol += 3.0 * bf16_ulp(max_v) + std::ldexp(max_v, -8);
        if (c.out_type == DType::bf16) tol += bf16_ulp(max_v + tol);
        return tol + 1e-30;
    }
};

std::vector<GqaCase> gqa_cases() {
    using M = AttentionMath;
    const DType f = DType::f32, b = DType::bf16;
    return {
        {1, 24, 2, 256, 2051, 64, b, b, b, M::bf16, true, false},  // the real model's decode shape (deployed)
        {32, 32, 1, 256, 600, 64, b, b, b, M::bf16, true, false},  // cuda: 2 splits, rows enough for the warps' combine
        {1, 24, 2, 256, 300, 64, f, f, f, M::f32, true, false},
        {5, 4, 2, 32, 19, 64, f, f, f, M::f32, true, true},         // the fixture's shape (exact)
        {5, 4, 2, 32, 19, 64, b, b, b, M::bf16, true, true},        // ... deployed
        {7, 6, 1, 16, 11, 4, f, b, f, M::f32, false, true},
        {3, 12, 1, 40, 33, 16, b, f, f, M::f32, true, false},      // group 12, odd head dim
        {4, 9, 3, 7, 5, 1, f, f, b, M::bf16, true, true},
        {2, 1, 1, 1, 3, 2, f, f, f, M::f32, false, false},
        {9, 16, 2, 64, 64, 16, f, f, f, M::f32, true, true},        // two P·V head batches (12 + 4)
        {2, 12, 1, 40, 150, 16, f, f, f, M::bf16, true, false},     // K chunks of 64 rows: 2 full, a partial one; dim tail
        {3, 10, 2, 24, 97, 8, b, b, f, M::f32, false, true},        // 5 heads per group; a chunk of 33 rows
        {3, 16, 1, 64, 130, 16, b, b, b, M::bf16, true, true},      // deployed P·V tiles of 32 dims, 12 + 4 heads, even rows
        {2, 6, 2, 32, 1, 4, b, b, b, M::bf16, false, false},        // one listed row: a P pair with no partner
        {2, 12, 2, 64, 70, 16, b, b, f, M::f32, true, false},       // bf16 q and K, f32 math: vdpbf16ps logits, f32 P·V
        {70, 8, 2, 64, 300, 16, b, b, b, M::bf16, true, false},     // cuda tensor cores: 140 blocks of one split, 5 rounds each
        {2, 40, 2, 64, 200, 16, b, b, f, M::bf16, true, true},      // cuda tensor cores: 20 heads per group, blocks of 16 + 4
        {3, 24, 2, 64, 150, 12, b, b, b, M::bf16, true, false},     // blocks of 12 entries (no power of two)
        {3, 8, 2, 32, 70, 12, f, f, f, M::f32, true, true},         // ... and for the fp32 kernels
    };
}

TEST(QsaSparseGqaConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(9001);
    for (const GqaCase& gc : gqa_cases()) {
        SCOPED_TRACE(fmt::format("T {} heads {}/{} D {} n {} block {} q {} kv {} out {} math {} gate {} padded {}",
                                 gc.n_tokens, gc.n_heads, gc.n_kv_heads, gc.head_dim, gc.n_indices, gc.block_size,
                                 dtype_name(gc.q_type), dtype_name(gc.kv_type), dtype_name(gc.out_type),
                                 attention_math_name(gc.math), gc.gate, gc.padded));
        GqaSetup s(rng, gc);
        const RowsLayout& ol = s.out_layout;
        RowsTensor want(ol, gc.out_type);
        ASSERT_TRUE(ref->qsa_sparse_gqa(s.params(want.data()), {}).is_ok());
        std::vector<double> tol;
        for (int64_t t = 0; t < gc.n_tokens; ++t)
            for (int64_t h = 0; h < gc.n_heads; ++h) {
                const double th = s.tolerance(t, h);
                for (int64_t i = 0; i < gc.head_dim; ++i) tol.push_back(th);
            }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor got(ol, gc.out_type);
            const QsaSparseGqaParams p = s.params(got.data());
            const size_t ws_bytes = nb.backend->qsa_sparse_gqa_workspace_size(p);
            GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
            const Status st = nb.backend->qsa_sparse_gqa(p, {ws.data(), ws_bytes});
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(all_close(want.values(), got.values(), tol, "attention output"));
            EXPECT_TRUE(got.intact("attention output"));
            EXPECT_TRUE(ws.guards_intact("workspace"));
            if (ws_bytes > 0) {  // too small a workspace is refused, not overrun
                const Status small = nb.backend->qsa_sparse_gqa(p, {ws.data(), ws_bytes - 1});
                EXPECT_EQ(small.code(), StatusCode::invalid_argument) << small.to_string();
            }
        }
        EXPECT_TRUE(s.kv->buf.guards_intact("kv"));
    }
}

// ref against values written out by hand: one query head over two positions, with and without the
// gate; an empty row gives 0 (×σ(gate) = 0).
TEST(QsaSparseGqaKnownValues, SoftmaxOverListedPositionsThenGate) {
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    Rng rng(3);
    PagedTestCache kv(rng, {3}, 2, 2 * 2 * 4);  // D = 2, one KV head: [K0 K1 V0 V1]
    const float rows[3][4] = {{1, 0, 10, -2}, {0, 1, 20, 4}, {1, 1, 1000, 1000}};
    for (int64_t e = 0; e < 3; ++e) std::memcpy(kv.entry(0, e), rows[e], 16);
    const float q[2][2] = {{2, 0}, {2, 0}};      // token 0, token 1; head 0
    const float gate[2][2] = {{0, 1}, {0, 0}};
    const std::vector<int32_t> idx = {-1, 0, 1, /*token 1: none*/ -1, -1, -1};
    const std::vector<int32_t> token_request = {0, 0};
    QsaSparseGqaParams p;
    p.q = q;
    p.kv = kv.view();
    p.tables = kv.tables(token_request);
    p.indices = idx.data();
    p.gate = gate;
    p.n_tokens = 2;
    p.n_heads = p.n_kv_heads = 1;
    p.head_dim = 2;
    p.n_indices = 3;
    p.index_row_stride = 3;
    p.q_token_stride = p.gate_token_stride = p.out_token_stride = 2;
    p.q_head_stride = p.gate_head_stride = p.out_head_stride = 2;
    p.scale = 0.5f;
    // l = 0.5·(2, 0) = (1, 0) → w = (e, 1)/(e + 1)
    const double e = std::exp(1.0);
    const double o0 = (e * 10 + 20) / (e + 1), o1 = (e * -2 + 4) / (e + 1);
    for (auto& [name, b] : ref_and(*ref, backends)) {
        SCOPED_TRACE(name);
        float out[2][2];
        std::memset(out, 0x7f, sizeof out);
        p.out = out;
        const size_t ws_bytes = b->qsa_sparse_gqa_workspace_size(p);
        GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
        ASSERT_TRUE(b->qsa_sparse_gqa(p, {ws.data(), ws_bytes}).is_ok());
        EXPECT_NEAR(out[0][0], o0 * 0.5, 1e-5);                         // σ(0) = 1/2
        EXPECT_NEAR(out[0][1], o1 / (1.0 + std::exp(-1.0)), 1e-5);
        EXPECT_EQ(out[1][0], 0.0f);
        EXPECT_EQ(out[1][1], 0.0f);
    }
}

// Non-finite inputs give non-finite outputs and only an empty row gives 0 (ops/qsa_sparse_gqa.h), on ref
// and every backend, for both math modes and f32 / bf16 q and kv, with the gate, over three chunks of
// listed rows. One request of 300 positions; 24 heads on 2 KV heads (12 per group). Tokens:
//   0 clean rows: finite      1 no valid row: exactly 0      2 NaN in head 3 of q: head 3 NaN
//   3 position 0 (NaN in KV head 0's K) listed first: heads 0-11 NaN, 12-23 finite
//   4 position 1 (NaN in KV head 1's V, dim 7) listed last: heads 12-23 non-finite (NaN in dim 7; the
//     logits stay finite), 0-11 finite
//   5 position 2 (inf in KV head 0's V) listed: heads 0-11 non-finite
TEST(QsaSparseGqaConformance, NonFiniteInputsGiveNonFiniteOutputsAndEmptyRowsZero) {
    auto backends = backends_under_test();
    backends.push_back({"ref", ref_backend()});
    Rng rng(9002);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const int64_t T = 6, H = 24, HKV = 2, D = 64, L = 300, N = 150;
    for (const DType type : {DType::f32, DType::bf16})
        for (const AttentionMath math : {AttentionMath::f32, AttentionMath::bf16}) {
            SCOPED_TRACE(fmt::format("q/kv {} math {}", dtype_name(type), attention_math_name(math)));
            PagedTestCache kv(rng, {L}, 16, 2 * HKV * D * static_cast<int64_t>(dtype_size(type)));
            kv.fill(type, 2 * HKV * D, [&] { return rng.normal(1.5f); });
            auto poison = [&](int64_t pos, int64_t i, float v) {  // element i of the entry [HKV, 2, D]
                if (type == DType::bf16)
                    reinterpret_cast<uint16_t*>(kv.entry(0, pos))[i] = f32_to_bf16(v);
                else
                    reinterpret_cast<float*>(kv.entry(0, pos))[i] = v;
            };
            poison(0, 5, nan);              // K of KV head 0
            poison(1, 3 * D + 7, nan);      // V of KV head 1
            poison(2, D + 9, inf);          // V of KV head 0
            const RowsLayout ql{T, H, D, H * D, D};
            RowsTensor q(ql, type), gate(ql, type);
            q.fill([&] { return rng.normal(1.0f); });
            gate.fill([&] { return rng.normal(2.0f); });
            if (type == DType::bf16)
                q.buf.as<uint16_t>()[ql.offset(2, 3, 11)] = f32_to_bf16(nan);
            else
                q.buf.as<float>()[ql.offset(2, 3, 11)] = nan;
            std::vector<int32_t> idx(static_cast<size_t>(T * N), -1);
            for (int64_t tk = 0; tk < T; ++tk) {
                if (tk == 1) continue;  // no valid row
                std::vector<int32_t> pos(static_cast<size_t>(L - 3));
                std::iota(pos.begin(), pos.end(), 3);
                std::shuffle(pos.begin(), pos.end(), rng.engine());
                for (int64_t j = 0; j < N; ++j)
                    if (!rng.coin(0.1)) idx[static_cast<size_t>(tk * N + j)] = pos[static_cast<size_t>(j)];
            }
            idx[static_cast<size_t>(3 * N)] = 0;
            idx[static_cast<size_t>(4 * N + N - 1)] = 1;
            idx[static_cast<size_t>(5 * N + 60)] = 2;
            const std::vector<int32_t> token_request(static_cast<size_t>(T), 0);
            auto expect = [&](int64_t tk, int64_t h) {
                const int64_t g = h / (H / HKV);
                if (tk == 1) return RowExpect::zero;
                if ((tk == 2 && h == 3) || (tk == 3 && g == 0)) return RowExpect::nan;
                if ((tk == 4 && g == 1) || (tk == 5 && g == 0)) return RowExpect::non_finite;
                return RowExpect::finite;
            };
            for (auto& nb : backends) {
                RowsTensor out(ql, DType::f32);
                QsaSparseGqaParams p;
                p.q = q.data();
                p.kv = kv.view();
                p.tables = kv.tables(token_request);
                p.indices = idx.data();
                p.gate = gate.data();
                p.out = out.data();
                p.n_tokens = T;
                p.n_heads = H;
                p.n_kv_heads = HKV;
                p.head_dim = D;
                p.n_indices = N;
                p.index_row_stride = N;
                p.q_token_stride = p.gate_token_stride = p.out_token_stride = H * D;
                p.q_head_stride = p.gate_head_stride = p.out_head_stride = D;
                p.scale = 0.125f;
                p.math = math;
                p.q_type = p.kv_type = p.gate_type = type;
                p.out_type = DType::f32;
                const size_t ws_bytes = nb.backend->qsa_sparse_gqa_workspace_size(p);
                GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
                const Status st = nb.backend->qsa_sparse_gqa(p, {ws.data(), ws_bytes});
                ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                for (int64_t tk = 0; tk < T; ++tk)
                    for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(row_is(out, tk, h, expect(tk, h), nb.spec));
                EXPECT_TRUE(out.intact(nb.spec));
            }
        }
}

}  // namespace
}  // namespace sieve::test

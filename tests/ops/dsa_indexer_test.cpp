// Conformance of the DSA Lightning Indexer ops (ops/dsa_indexer.h): key writes (cache_store) byte-exact with
// ref in both formats; the fp8_row_scale layout matches dsa_mla.md §3.3 byte by byte (132 bytes per token for
// Di = 128, values of a block first, then its scales); index scores agree with ref within a derived bound
// over paged block tables, several sequences, ragged n_keys, and with hand-computed values; validate()
// rejects malformed calls.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "dsa_test_util.h"
#include "ops/cache_store.h"
#include "ops/dsa_indexer.h"
#include "ops/op_common.h"
#include "ops/topk.h"

namespace sieve::test {
namespace {

CacheStoreParams key_write(const GuardedCache& cache, CacheRecordFormat f, int64_t d, const void* k,
                           DType kt, int64_t stride, const int32_t* slots, int64_t n) {
    CacheStoreParams p;
    p.x = k;
    p.slots = slots;
    p.cache = cache.view;
    p.layout = {f, d, 0};
    p.n_slots = cache.n_slots();
    p.n_rows = n;
    p.dim = d;
    p.x_row_stride = stride;
    p.x_type = kt;
    return p;
}
int64_t key_entry_bytes(CacheRecordFormat f, int64_t d) { return CacheRecordLayout{f, d, 0}.entry_bytes(); }

TEST(DsaIndexerKeyWrite, EveryBackendMatchesRefBitForBit) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7201);
    for (int c = 0; c < 16; ++c) {
        const int64_t d = rng.pick<int64_t>({128, 16, 20, 64, 1});
        const auto f = c % 2 ? CacheRecordFormat::fp8_row_scale : CacheRecordFormat::f32;
        const int64_t n = rng.pick<int64_t>({1, 6, 19}), block_size = rng.pick<int64_t>({4, 64}), n_blocks = 3;
        const DType kt = rng.coin() ? DType::bf16 : DType::f32;
        SCOPED_TRACE(fmt::format("case {}: Di {} {} T {} B {} {}", c, d, cache_record_format_name(f), n, block_size,
                                 dtype_name(kt)));
        std::vector<int64_t> all(static_cast<size_t>(n_blocks * block_size));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng.engine());
        std::vector<int32_t> slots(all.begin(), all.begin() + std::min<int64_t>(n, n_blocks * block_size));
        for (auto& s : slots)
            if (rng.coin(0.15)) s = -1;
        const int64_t n_tok = static_cast<int64_t>(slots.size());
        const int64_t stride = d + rng.integer(0, 3);
        std::vector<uint8_t> k(static_cast<size_t>(n_tok * stride) * dtype_size(kt));
        fill_rows(k.data(), kt, n_tok, 1, d, stride, 0, [&, i = int64_t{0}]() mutable {
            const int64_t row = i++ / d;
            if (row % 5 == 4 && rng.coin(0.3)) return std::numeric_limits<float>::quiet_NaN();  // poisoned key
            return rng.normal(std::ldexp(1.0f, static_cast<int>(row % 9) - 4));
        });
        const int64_t entry = key_entry_bytes(f, d);
        GuardedCache want(n_blocks, block_size, entry, 64);
        ASSERT_TRUE(ref->cache_store(key_write(want, f, d, k.data(), kt, stride, slots.data(), n_tok)).is_ok());
        for (auto& nb : backends) {
            GuardedCache got(n_blocks, block_size, entry, 64);
            const Status st = nb.backend->cache_store(key_write(got, f, d, k.data(), kt, stride, slots.data(), n_tok));
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            EXPECT_TRUE(bytes_equal(want.buf.data(), got.buf.data(), want.buf.bytes(), nb.spec));
            EXPECT_TRUE(got.buf.guards_intact(nb.spec));
        }
    }
}

// dsa_mla.md §3.3 with Di = 128, B = 64: a block is 64·132 bytes; token i's 128 e4m3 values at
// blk·B·132 + i·128, its fp32 scale at blk·B·132 + B·128 + 4·i; the scale is 2^ceil(log2(amax/448)).
TEST(DsaIndexerKeyWrite, DeepGemmBlockLayoutByteByByte) {
    ASSERT_EQ(key_entry_bytes(CacheRecordFormat::fp8_row_scale, 128), 132);
    ASSERT_EQ(key_entry_bytes(CacheRecordFormat::fp8_row_scale, 16), 20);  // the fixtures' Di
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    Rng rng(7202);
    const int64_t d = 128, B = 64;
    std::vector<float> k(3 * d);
    const float amax[3] = {3.0f, 448.0f * 4.0f, 7e-3f};
    for (int t = 0; t < 3; ++t)
        for (int i = 0; i < d; ++i) k[static_cast<size_t>(t * d + i)] = i == 9 ? amax[t] : rng.uniform(-amax[t], amax[t]);
    const int32_t slots[3] = {B + 0, B + 63, 2 * B + 17};  // first and last entry of block 1, one of block 2
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        GuardedCache cache(3, B, 132);
        ASSERT_EQ(cache.view.block_bytes, B * 132);
        ASSERT_TRUE(nb.backend
                        ->cache_store(key_write(cache, CacheRecordFormat::fp8_row_scale, d, k.data(),
                                                          DType::f32, d, slots, 3))
                        .is_ok());
        const uint8_t* base = cache.buf.as<uint8_t>();
        std::vector<bool> written(cache.buf.bytes(), false);
        for (int t = 0; t < 3; ++t) {
            const int64_t blk = slots[t] / B, off = slots[t] % B;
            const int64_t value_at = blk * B * 132 + off * 128, scale_at = blk * B * 132 + B * 128 + 4 * off;
            EXPECT_EQ(value_at, cache_record_data(cache.view, {CacheRecordFormat::fp8_row_scale, d}, slots[t]) - cache.view.base);
            EXPECT_EQ(scale_at, cache_record_scales(cache.view, {CacheRecordFormat::fp8_row_scale, d}, slots[t]) - cache.view.base);
            float s;
            std::memcpy(&s, base + scale_at, 4);
            const float want_s = static_cast<float>(std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(amax[t] / 448.0)))));
            EXPECT_EQ(s, want_s) << "token " << t;
            for (int i = 0; i < d; ++i)
                EXPECT_EQ(base[value_at + i], f32_to_fp8_e4m3(k[static_cast<size_t>(t * d + i)] / want_s))
                    << "token " << t << " value " << i;
            for (int i = 0; i < 128; ++i) written[static_cast<size_t>(value_at + i)] = true;
            for (int i = 0; i < 4; ++i) written[static_cast<size_t>(scale_at + i)] = true;
        }
        EXPECT_EQ(base[B * 132 + 9], 0x7c) << "token 0's amax 3 / 2^-7 = 384 = 1.100b·2^8 → e4m3 0x7C";
        for (size_t i = 0; i < cache.buf.bytes(); ++i)
            if (!written[i]) {
                ASSERT_EQ(base[i], kPoison) << "byte " << i << " outside the written entries";
            }
        EXPECT_TRUE(cache.buf.guards_intact(nb.spec));
    }
}

struct ScoreCase {
    int64_t heads, dim, tokens, seqs, block_size;
    CacheRecordFormat format;
};

TEST(DsaIndexerScores, EveryBackendAgreesWithRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7203);
    const std::vector<ScoreCase> cases = {
        {8, 16, 6, 2, 4, CacheRecordFormat::f32},   {8, 16, 5, 3, 4, CacheRecordFormat::fp8_row_scale},
        {64, 128, 3, 1, 64, CacheRecordFormat::fp8_row_scale}, {32, 128, 4, 2, 64, CacheRecordFormat::f32},
        {5, 20, 7, 3, 8, CacheRecordFormat::f32},   {3, 24, 4, 2, 16, CacheRecordFormat::fp8_row_scale},
        {1, 1, 3, 1, 4, CacheRecordFormat::f32},    {7, 128, 2, 2, 16, CacheRecordFormat::fp8_row_scale},
        // Many rows per sequence (the cpu kernel converts a key tile once for all the rows of its sequence),
        // odd Di (a zero partner for the last bf16 pair), heads not a multiple of the lanes.
        {64, 128, 40, 1, 64, CacheRecordFormat::fp8_row_scale}, {17, 33, 24, 2, 16, CacheRecordFormat::fp8_row_scale},
        {12, 20, 30, 3, 8, CacheRecordFormat::f32},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const ScoreCase& k = cases[ci];
        const bool fp8 = k.format == CacheRecordFormat::fp8_row_scale;
        // Sequence lengths up to ~1.3 key chunks of the cpu kernel, some short.
        std::vector<int64_t> seq_len(static_cast<size_t>(k.seqs));
        for (auto& L : seq_len) L = rng.pick<int64_t>({1, 9, 70, 300, 1300});
        int64_t blocks_needed = 0, max_len = 0;
        for (int64_t L : seq_len) {
            blocks_needed += (L + k.block_size - 1) / k.block_size;
            max_len = std::max(max_len, L);
        }
        SCOPED_TRACE(fmt::format("case {}: Hi {} Di {} T {} seqs {} B {} {}", ci, k.heads, k.dim, k.tokens, k.seqs,
                                 k.block_size, cache_record_format_name(k.format)));
        const int64_t n_blocks = blocks_needed + 2;
        GuardedCache cache(n_blocks, k.block_size, key_entry_bytes(k.format, k.dim));
        std::vector<int32_t> free_blocks;
        const int64_t table_stride = (max_len + k.block_size - 1) / k.block_size + 1;
        std::vector<int32_t> tables(static_cast<size_t>(k.seqs * table_stride), -1);
        for (int64_t s = 0; s < k.seqs; ++s) {  // write every key of every sequence through ref
            const std::vector<int32_t> t = random_block_table(rng, seq_len[static_cast<size_t>(s)], k.block_size, n_blocks, free_blocks);
            std::copy(t.begin(), t.end(), tables.begin() + s * table_stride);
            const int64_t L = seq_len[static_cast<size_t>(s)];
            std::vector<float> keys(static_cast<size_t>(L * k.dim));
            for (auto& v : keys) v = rng.normal(1.0f);
            std::vector<int32_t> slots(static_cast<size_t>(L));
            for (int64_t u = 0; u < L; ++u) slots[static_cast<size_t>(u)] = t[static_cast<size_t>(u / k.block_size)] * k.block_size + u % k.block_size;
            ASSERT_TRUE(ref->cache_store(key_write(cache, k.format, k.dim, keys.data(), DType::f32, k.dim,
                                                             slots.data(), L))
                            .is_ok());
        }
        const int64_t q_head = k.dim + rng.integer(0, 2), q_token = k.heads * q_head + rng.integer(0, 3);
        std::vector<float> qf(static_cast<size_t>(k.tokens * q_token));
        std::vector<uint8_t> q8(static_cast<size_t>(k.tokens * q_token));
        for (auto& v : qf) v = rng.normal(1.0f);
        for (auto& b : q8) {
            b = static_cast<uint8_t>(rng.integer(0, 255));
            if ((b & 0x7f) == 0x7f) b = 0x38;  // no NaN codes in q
        }
        const int64_t w_stride = k.heads + rng.integer(0, 3);
        std::vector<float> w(static_cast<size_t>(k.tokens * w_stride)), q_scale(static_cast<size_t>(k.tokens * w_stride));
        for (auto& v : w) v = rng.normal(1.0f);
        for (auto& v : q_scale) v = std::ldexp(1.0f, static_cast<int>(rng.integer(-8, 2)));
        std::vector<int32_t> token_seq(static_cast<size_t>(k.tokens)), n_keys(static_cast<size_t>(k.tokens));
        int64_t n_cols = 0;
        for (int64_t t = 0; t < k.tokens; ++t) {
            token_seq[static_cast<size_t>(t)] = static_cast<int32_t>(rng.integer(0, k.seqs - 1));
            const int64_t L = seq_len[static_cast<size_t>(token_seq[static_cast<size_t>(t)])];
            n_keys[static_cast<size_t>(t)] = static_cast<int32_t>(t == 0 ? 0 : rng.integer(std::max<int64_t>(1, L - 5), L));
            n_cols = std::max<int64_t>(n_cols, n_keys[static_cast<size_t>(t)]);
        }
        n_cols += 3;  // −inf tail on every row
        const float weight_scale = 0.125f;
        const int64_t s_stride = n_cols + rng.integer(0, 3);
        auto params = [&](float* scores) {
            DsaIndexerScoresParams p;
            p.q = fp8 ? static_cast<const void*>(q8.data()) : qf.data();
            p.q_type = fp8 ? DType::f8_e4m3 : DType::f32;
            p.q_scale = fp8 ? q_scale.data() : nullptr;
            p.q_scale_token_stride = w_stride;
            p.weights = w.data();
            p.weights_token_stride = w_stride;
            p.weight_scale = weight_scale;
            p.keys = cache.view;
            p.n_slots = cache.n_slots();
            p.block_table = tables.data();
            p.n_seqs = k.seqs;
            p.block_table_stride = table_stride;
            p.token_seq = token_seq.data();
            p.n_keys = n_keys.data();
            p.scores = scores;
            p.n_tokens = k.tokens;
            p.n_heads = k.heads;
            p.head_dim = k.dim;
            p.n_cols = n_cols;
            p.q_token_stride = q_token;
            p.q_head_stride = q_head;
            p.scores_row_stride = s_stride;
            p.format = k.format;
            return p;
        };
        GuardedBuffer want(static_cast<size_t>(k.tokens * s_stride) * 4);
        ASSERT_TRUE(ref->dsa_indexer_scores(params(want.as<float>()), {}).is_ok());
        // Tolerance: each head's dot d_j is off by ≤ γ(Di+1)·Σ_d|q·k|; ReLU is 1-Lipschitz; the weighted head sum
        // adds γ(Hi+1)·Σ_j|w_j·relu(d_j)|; folding weight_scale, q_scale and the key scale adds ≤ 4u relative.
        std::vector<double> want_v, tol;
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t u = 0; u < n_cols; ++u) {
                const double wv = want.as<float>()[t * s_stride + u];
                want_v.push_back(wv);
                if (u >= n_keys[static_cast<size_t>(t)]) {
                    tol.push_back(0.0);
                    continue;
                }
                const int64_t sq = token_seq[static_cast<size_t>(t)];
                const int64_t slot = tables[static_cast<size_t>(sq * table_stride + u / k.block_size)] * k.block_size + u % k.block_size;
                std::vector<double> key(static_cast<size_t>(k.dim));
                double ks = 1.0;
                if (fp8) {
                    const uint8_t* kv = cache_record_data(cache.view, {k.format, k.dim}, slot);
                    float s;
                    std::memcpy(&s, cache_record_scales(cache.view, {k.format, k.dim}, slot), 4);
                    ks = s;
                    for (int64_t i = 0; i < k.dim; ++i) key[static_cast<size_t>(i)] = fp8_e4m3_to_f32(kv[i]);
                } else {
                    const float* kv = reinterpret_cast<const float*>(cache.view.base + (slot / k.block_size) * cache.view.block_bytes +
                                                                     (slot % k.block_size) * cache.view.entry_bytes);
                    for (int64_t i = 0; i < k.dim; ++i) key[static_cast<size_t>(i)] = kv[i];
                }
                double bound = 0, mass = 0;
                for (int64_t j = 0; j < k.heads; ++j) {
                    double wj = w[static_cast<size_t>(t * w_stride + j)] * weight_scale;
                    if (fp8) wj *= q_scale[static_cast<size_t>(t * w_stride + j)];
                    double dot = 0, sabs = 0;
                    for (int64_t i = 0; i < k.dim; ++i) {
                        const double qi = fp8 ? fp8_e4m3_to_f32(q8[static_cast<size_t>(t * q_token + j * q_head + i)])
                                              : qf[static_cast<size_t>(t * q_token + j * q_head + i)];
                        dot += qi * key[static_cast<size_t>(i)];
                        sabs += std::fabs(qi * key[static_cast<size_t>(i)]);
                    }
                    bound += std::fabs(wj) * gamma_n(static_cast<double>(k.dim) + 1) * sabs;
                    mass += std::fabs(wj * std::max(dot, 0.0));
                }
                tol.push_back(ks * (bound + (gamma_n(static_cast<double>(k.heads) + 1) + 4 * kU) * mass) + 2 * kU * std::fabs(wv) + 1e-30);
            }
        for (auto& nb : backends) {
            GuardedBuffer got(static_cast<size_t>(k.tokens * s_stride) * 4);
            auto p = params(got.as<float>());
            const size_t ws_bytes = nb.backend->dsa_indexer_scores_workspace_size(p);
            GuardedBuffer ws(std::max<size_t>(1, ws_bytes));
            const Status st = nb.backend->dsa_indexer_scores(p, {ws.data(), ws_bytes});
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            std::vector<double> got_v;
            for (int64_t t = 0; t < k.tokens; ++t)
                for (int64_t u = 0; u < n_cols; ++u) got_v.push_back(got.as<float>()[t * s_stride + u]);
            EXPECT_TRUE(all_close(want_v, got_v, tol, nb.spec));
            EXPECT_TRUE(untouched_outside_rows(got, k.tokens, 1, n_cols, s_stride, 0, 4, nb.spec));
            EXPECT_TRUE(got.guards_intact(nb.spec));
            EXPECT_TRUE(ws.guards_intact(nb.spec + " workspace"));

            // Fused selection (ops/dsa_indexer.h): exactly the top-k of this backend's own scores, with and
            // without score rows written.
            for (int64_t kk : {int64_t{1}, std::max<int64_t>(1, n_cols / 3), n_cols + 2}) {
                SCOPED_TRACE(nb.spec + " fused k " + std::to_string(kk));
                std::vector<int32_t> want_sel(static_cast<size_t>(k.tokens * kk), -7);
                TopkParams tp;
                tp.scores = got.as<float>();
                tp.valid_len = n_keys.data();
                tp.out = want_sel.data();
                tp.n_rows = k.tokens;
                tp.n_cols = n_cols;
                tp.k = kk;
                tp.scores_row_stride = s_stride;
                tp.out_row_stride = kk;
                ASSERT_TRUE(ref->topk(tp, {}).is_ok());
                for (bool with_scores : {false, true}) {
                    GuardedBuffer sel(static_cast<size_t>(k.tokens * kk) * 4), rows(static_cast<size_t>(k.tokens * s_stride) * 4);
                    auto fp = params(with_scores ? rows.as<float>() : nullptr);
                    fp.selected = sel.as<int32_t>();
                    fp.k = kk;
                    fp.selected_row_stride = kk;
                    const size_t fws_bytes = nb.backend->dsa_indexer_scores_workspace_size(fp);
                    GuardedBuffer fws(std::max<size_t>(1, fws_bytes));
                    const Status fs = nb.backend->dsa_indexer_scores(fp, {fws.data(), fws_bytes});
                    ASSERT_TRUE(fs.is_ok()) << fs.to_string();
                    EXPECT_TRUE(std::equal(want_sel.begin(), want_sel.end(), sel.as<int32_t>())) << "with scores " << with_scores;
                    if (with_scores) {
                        for (int64_t t = 0; t < k.tokens; ++t) {
                            EXPECT_EQ(0, std::memcmp(rows.as<float>() + t * s_stride, got.as<float>() + t * s_stride,
                                                     static_cast<size_t>(n_cols) * 4)) << "row " << t;
                        }
                    }
                    EXPECT_TRUE(sel.guards_intact("selected"));
                    EXPECT_TRUE(fws.guards_intact("fused workspace"));
                }
            }
        }
    }
}

// Hand-computed scores, Hi = 2, Di = 2, f32 keys k_0 = (1, 0), k_1 = (0, 2), k_2 = (−1, −1):
//   q_0 = (1, 1), q_1 = (2, −1), weights (1, −0.5), weight_scale 2:
//   I[u] = 2·(1·relu(q_0·k_u) − 0.5·relu(q_1·k_u)) → I[0] = 2·(1 − 1) = 0, I[1] = 2·(2 − 0) = 4, I[2] = 0,
//   and −inf past n_keys = 3. The fp8 form of the same keys: one scale per key, q scale folded in.
TEST(DsaIndexerScores, KnownValues) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    const float keys[3][2] = {{1, 0}, {0, 2}, {-1, -1}};
    const float q[4] = {1, 1, 2, -1};
    const float w[2] = {1, -0.5f};
    for (const auto format : {CacheRecordFormat::f32, CacheRecordFormat::fp8_row_scale}) {
        for (auto& nb : backends) {
            SCOPED_TRACE(fmt::format("{} {}", nb.spec, cache_record_format_name(format)));
            GuardedCache cache(2, 2, key_entry_bytes(format, 2));
            const int32_t slots[3] = {2, 3, 0};  // block table {1, 0}
            ASSERT_TRUE(nb.backend->cache_store(key_write(cache, format, 2, keys, DType::f32, 2, slots, 3)).is_ok());
            const int32_t table[2] = {1, 0}, seq = 0, n_keys = 3;
            uint8_t q8[4];
            float q_scale[2];
            for (int j = 0; j < 2; ++j) {  // q quantized as the model does: one UE8M0 scale per head
                const float amax = std::max(std::fabs(q[2 * j]), std::fabs(q[2 * j + 1]));
                q_scale[j] = ue8m0_scale_for_amax(amax);
                for (int i = 0; i < 2; ++i) q8[2 * j + i] = f32_to_fp8_e4m3(q[2 * j + i] / q_scale[j]);
            }
            float scores[4] = {7, 7, 7, 7};
            DsaIndexerScoresParams p;
            const bool fp8 = format == CacheRecordFormat::fp8_row_scale;
            p.q = fp8 ? static_cast<const void*>(q8) : q;
            p.q_type = fp8 ? DType::f8_e4m3 : DType::f32;
            p.q_scale = fp8 ? q_scale : nullptr;
            p.q_scale_token_stride = 2;
            p.weights = w;
            p.weights_token_stride = 2;
            p.weight_scale = 2.0f;
            p.keys = cache.view;
            p.n_slots = cache.n_slots();
            p.block_table = table;
            p.n_seqs = 1;
            p.block_table_stride = 2;
            p.token_seq = &seq;
            p.n_keys = &n_keys;
            p.scores = scores;
            p.n_tokens = 1;
            p.n_heads = 2;
            p.head_dim = 2;
            p.n_cols = 4;
            p.q_token_stride = 4;
            p.q_head_stride = 2;
            p.scores_row_stride = 4;
            p.format = format;
            std::vector<uint8_t> ws(nb.backend->dsa_indexer_scores_workspace_size(p) + 64);
            void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
            ASSERT_TRUE(nb.backend->dsa_indexer_scores(p, {aligned, nb.backend->dsa_indexer_scores_workspace_size(p)}).is_ok());
            // These small integers are exact in e4m3 with power-of-two scales: both formats give the same values.
            EXPECT_FLOAT_EQ(scores[0], 0.0f);
            EXPECT_FLOAT_EQ(scores[1], 4.0f);
            EXPECT_FLOAT_EQ(scores[2], 0.0f);
            EXPECT_EQ(scores[3], -std::numeric_limits<float>::infinity());
        }
    }
}

TEST(DsaIndexerValidate, RejectsMalformedCalls) {
    GuardedCache cache(2, 4, key_entry_bytes(CacheRecordFormat::f32, 4));
    std::vector<float> q(2 * 8, 0.0f), w(4, 1.0f), scores(2 * 8);
    std::vector<int32_t> table = {1, 0}, seq = {0, 0}, n_keys = {5, 8};
    auto base = [&] {
        DsaIndexerScoresParams p;
        p.q = q.data();
        p.weights = w.data();
        p.weights_token_stride = 2;
        p.weight_scale = 0.5f;
        p.keys = cache.view;
        p.n_slots = cache.n_slots();
        p.block_table = table.data();
        p.n_seqs = 1;
        p.block_table_stride = 2;
        p.token_seq = seq.data();
        p.n_keys = n_keys.data();
        p.scores = scores.data();
        p.n_tokens = 2;
        p.n_heads = 2;
        p.head_dim = 4;
        p.n_cols = 8;
        p.q_token_stride = 8;
        p.q_head_stride = 4;
        p.scores_row_stride = 8;
        return p;
    };
    ASSERT_TRUE(validate(base()).is_ok()) << validate(base()).to_string();
    auto expect_bad = [&](const DsaIndexerScoresParams& p, StatusCode code, const char* needle) {
        const Status s = validate(p);
        EXPECT_EQ(s.code(), code) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
    };
    // A content error: validate (which reads no array) accepts, check_indices and the host check refuse.
    auto expect_bad_indices = [&](const DsaIndexerScoresParams& p, StatusCode code, const char* needle) {
        EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
        for (const Status& s : {check_indices(p), validate_and_check_indices(p)}) {
            EXPECT_EQ(s.code(), code) << s.to_string();
            EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
        }
    };
    auto p = base();
    p.q_type = DType::f8_e4m3;  // with f32 keys
    expect_bad(p, StatusCode::invalid_argument, "q_type");
    p = base();
    p.format = CacheRecordFormat::fp8_row_scale;  // f32 q with fp8 keys
    expect_bad(p, StatusCode::invalid_argument, "q_type");
    n_keys[1] = 9;
    expect_bad_indices(base(), StatusCode::invalid_argument, "n_keys[1] = 9");
    n_keys[1] = 8;
    table[0] = -1;  // a candidate block not resident
    expect_bad_indices(base(), StatusCode::invalid_argument, "physical block -1");
    table[0] = 2;  // past the cache
    expect_bad_indices(base(), StatusCode::invalid_argument, "physical block 2");
    table[0] = 1;
    seq[1] = 1;
    expect_bad_indices(base(), StatusCode::invalid_argument, "token_seq[1] = 1");
    seq[1] = 0;
    p = base();
    p.head_dim = 256;
    p.format = CacheRecordFormat::fp8_row_scale;
    p.q_type = DType::f8_e4m3;
    expect_bad(p, StatusCode::unsupported, "head_dim = 256");
    p = base();
    p.weight_scale = -1.0f;
    expect_bad(p, StatusCode::invalid_argument, "weight_scale");
    p = base();
    p.scores = q.data();  // overlaps q
    expect_bad(p, StatusCode::invalid_argument, "overlap");
    p = base();
    p.q_scale = w.data();  // q_scale with f32 q
    expect_bad(p, StatusCode::invalid_argument, "q_scale");
    // Every backend returns check_indices' Status.
    auto ref = ref_backend();
    n_keys[1] = 9;
    auto backends = backends_under_test();
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : backends) all.push_back(nb.backend.get());
    for (Backend* b : all) {
        const size_t ws_bytes = b->dsa_indexer_scores_workspace_size(base());
        GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
        const Status s = b->dsa_indexer_scores(base(), {ws.data(), ws_bytes});
        EXPECT_NE(s.message().find("n_keys[1] = 9"), std::string::npos) << b->name() << ": " << s.to_string();
    }
    n_keys[1] = 8;

    std::vector<float> k(2 * 4);
    std::vector<int32_t> slots = {0, 8};  // the cache has 8 slots
    const CacheStoreParams kw = key_write(cache, CacheRecordFormat::f32, 4, k.data(), DType::f32, 4, slots.data(), 2);
    EXPECT_TRUE(validate(kw).is_ok()) << validate(kw).to_string();
    for (const Status& s : {check_indices(kw), validate_and_check_indices(kw), ref->cache_store(kw)})
        EXPECT_NE(s.message().find("slots[1] = 8, expected −1 or a slot in [0, 8)"), std::string::npos) << s.to_string();
    for (auto& nb : backends_under_test())
        EXPECT_NE(nb.backend->cache_store(kw).message().find("slots[1] = 8"), std::string::npos) << nb.spec;
    slots[1] = -2;
    EXPECT_NE(check_indices(kw).message().find("slots[1] = -2"), std::string::npos) << check_indices(kw).to_string();
    slots[1] = 7;
    EXPECT_TRUE(validate_and_check_indices(kw).is_ok());
}

}  // namespace
}  // namespace sieve::test

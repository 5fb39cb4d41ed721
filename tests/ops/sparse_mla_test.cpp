// Conformance of DSA-on-MLA's sparse MLA attention (ops/sparse_mla.h) over latent caches written by
// cache_store (whose f32 and fp8_v32 bytes tests/ops/cache_store_test.cpp checks): it agrees with ref within
// a derived bound and with hand-computed values (sink, lonely rows, duplicates, ±inf sinks); validate()
// rejects malformed calls.
#include <cmath>
#include <limits>

#include "dsa_test_util.h"
#include "rows.h"
#include "ops/cache_store.h"
#include "ops/op_common.h"
#include "ops/sparse_mla.h"

namespace sieve::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Independent decode of one latent entry (dsa_mla.md §3.4 / ops/sparse_mla.h), for the tolerance and the
// known-value checks.
std::vector<double> decode_entry(const CacheView& c, CacheRecordFormat f, int64_t r, int64_t dr, int64_t slot) {
    const uint8_t* e = c.base + (slot / c.block_size) * c.block_bytes + (slot % c.block_size) * c.entry_bytes;
    std::vector<double> out(static_cast<size_t>(r + dr));
    if (f == CacheRecordFormat::f32) {
        for (int64_t i = 0; i < r + dr; ++i) {
            float v;
            std::memcpy(&v, e + 4 * i, 4);
            out[static_cast<size_t>(i)] = v;
        }
        return out;
    }
    const int64_t g = std::min<int64_t>(r, 128);
    for (int64_t i = 0; i < r; ++i) {
        float s;
        std::memcpy(&s, e + r + 4 * (i / g), 4);
        out[static_cast<size_t>(i)] = static_cast<double>(fp8_e4m3_to_f32(e[i])) * s;
    }
    for (int64_t j = 0; j < dr; ++j) {
        uint16_t b;
        std::memcpy(&b, e + r + 4 * (r / g) + 2 * j, 2);
        out[static_cast<size_t>(r + j)] = bf16_to_f32(b);
    }
    return out;
}

struct AttnCase {
    int64_t r, dr, heads, tokens, topk;
    CacheRecordFormat format;
    DType q_type, out_type;
    int sink;  // 0 none, 1 finite, 2 with ±inf heads
};

// Bytes of a latent entry [c | kr] (ops/cache_record.h).
int64_t entry_bytes(CacheRecordFormat f, int64_t r, int64_t dr) { return CacheRecordLayout{f, r + dr, dr}.entry_bytes(); }

// Fills every slot of a cache with random entries [c | kr] (through ref's cache_store, so fp8 records are
// valid).
void fill_cache(Backend& ref, GuardedCache& cache, CacheRecordFormat f, int64_t r, int64_t dr, Rng& rng) {
    const int64_t n = cache.n_slots();
    std::vector<float> rows(static_cast<size_t>(n * (r + dr)));
    for (auto& v : rows) v = rng.normal(1.0f);
    std::vector<int32_t> slots(static_cast<size_t>(n));
    std::iota(slots.begin(), slots.end(), 0);
    CacheStoreParams p;
    p.x = rows.data();
    p.slots = slots.data();
    p.cache = cache.view;
    p.layout = {f, r + dr, dr};
    p.n_slots = n;
    p.n_rows = n;
    p.dim = r + dr;
    p.x_row_stride = r + dr;
    ASSERT_TRUE(ref.cache_store(p).is_ok());
}

TEST(SparseMlaAttention, EveryBackendAgreesWithRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7103);
    const std::vector<AttnCase> cases = {
        {32, 8, 4, 5, 16, CacheRecordFormat::f32, DType::f32, DType::f32, 1},
        {32, 8, 4, 3, 16, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1},
        {512, 64, 16, 2, 70, CacheRecordFormat::fp8_v32, DType::bf16, DType::f32, 0},
        {512, 64, 3, 1, 150, CacheRecordFormat::f32, DType::f32, DType::bf16, 2},
        {40, 8, 5, 4, 9, CacheRecordFormat::f32, DType::f32, DType::f32, 2},
        {40, 8, 2, 7, 65, CacheRecordFormat::fp8_v32, DType::f32, DType::f32, 1},
        {128, 0, 1, 3, 1, CacheRecordFormat::f32, DType::bf16, DType::f32, 0},
        {256, 64, 8, 6, 33, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const AttnCase& k = cases[ci];
        const int64_t dqk = k.r + k.dr, block_size = 16, n_blocks = 12;
        SCOPED_TRACE(fmt::format("case {}: R {} Dr {} H {} T {} topk {} {} q {} out {} sink {}", ci, k.r, k.dr, k.heads,
                                 k.tokens, k.topk, cache_record_format_name(k.format), dtype_name(k.q_type),
                                 dtype_name(k.out_type), k.sink));
        GuardedCache cache(n_blocks, block_size, entry_bytes(k.format, k.r, k.dr));
        fill_cache(*ref, cache, k.format, k.r, k.dr, rng);
        const int64_t q_head = dqk + rng.integer(0, 3), q_token = k.heads * q_head + rng.integer(0, 7);
        const int64_t o_head = k.r + rng.integer(0, 3), o_token = k.heads * o_head + rng.integer(0, 7);
        const int64_t s_row = k.topk + rng.integer(0, 3);
        std::vector<uint8_t> q(static_cast<size_t>(k.tokens * q_token) * dtype_size(k.q_type));
        fill_rows(q.data(), k.q_type, k.tokens, k.heads, dqk, q_token, q_head, [&] { return rng.normal(1.0f); });
        std::vector<int32_t> slots(static_cast<size_t>(k.tokens * s_row), -7);
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t j = 0; j < k.topk; ++j) {
                const bool empty_row = t == 1;  // a lonely row
                slots[static_cast<size_t>(t * s_row + j)] =
                    empty_row || rng.coin(0.2) ? -1 : static_cast<int32_t>(rng.integer(0, cache.n_slots() - 1));
            }
        std::vector<float> sink(static_cast<size_t>(k.heads));
        for (auto& s : sink) s = rng.normal(2.0f);
        if (k.sink == 2) {
            sink[0] = kInf;
            if (k.heads > 1) sink[1] = -kInf;
        }
        const float scale = rng.uniform(0.05f, 0.4f);
        auto params = [&](void* out) {
            SparseMlaAttentionParams p;
            p.q = q.data();
            p.cache = cache.view;
            p.n_slots = cache.n_slots();
            p.slots = slots.data();
            p.sink = k.sink ? sink.data() : nullptr;
            p.out = out;
            p.scale = scale;
            p.n_tokens = k.tokens;
            p.n_heads = k.heads;
            p.kv_lora_rank = k.r;
            p.rope_dim = k.dr;
            p.topk = k.topk;
            p.q_token_stride = q_token;
            p.q_head_stride = q_head;
            p.slots_row_stride = s_row;
            p.out_token_stride = o_token;
            p.out_head_stride = o_head;
            p.format = k.format;
            p.q_type = k.q_type;
            p.out_type = k.out_type;
            return p;
        };
        const RowsLayout ol{k.tokens, k.heads, k.r, o_token, o_head};
        RowsTensor want(ol, k.out_type);
        ASSERT_TRUE(ref->sparse_mla_attention(params(want.data()), {}).is_ok());
        // Tolerance per element (see the derivation in the file comment of harness.h and below): the logits
        // carry |δl| ≤ γ(dqk+2)·scale·Σ|q·K| + u|l|; a perturbation ε of the logits moves the output by at most
        // 2ε·Σ_j p_j|c_j| (numerator and denominator); exp, the online-softmax rescales (one per chunk of 64)
        // and the sums add a few u each.
        std::vector<double> tol;
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t h = 0; h < k.heads; ++h) {
                std::vector<std::vector<double>> ent;
                std::vector<double> l, s1;
                for (int64_t j = 0; j < k.topk; ++j) {
                    const int32_t sl = slots[static_cast<size_t>(t * s_row + j)];
                    if (sl < 0) continue;
                    ent.push_back(decode_entry(cache.view, k.format, k.r, k.dr, sl));
                    double dot = 0, sabs = 0;
                    for (int64_t i = 0; i < dqk; ++i) {
                        const double qi = load_as_f32(q.data(), k.q_type, t * q_token + h * q_head + i);
                        dot += qi * ent.back()[static_cast<size_t>(i)];
                        sabs += std::fabs(qi * ent.back()[static_cast<size_t>(i)]);
                    }
                    l.push_back(scale * dot);
                    s1.push_back(scale * sabs);
                }
                const double sg = k.sink ? sink[static_cast<size_t>(h)] : -INFINITY;
                double m = sg, eps = 0;
                for (size_t j = 0; j < l.size(); ++j) {
                    m = std::max(m, l[j]);
                    eps = std::max(eps, gamma_n(static_cast<double>(dqk) + 2) * s1[j] + kU * std::fabs(l[j]));
                }
                const int64_t chunks = static_cast<int64_t>(l.size()) / 64 + 1;
                eps = 2 * eps + 4 * kU * static_cast<double>(chunks + 2);
                double den = std::isfinite(sg) ? std::exp(sg - m) : 0.0;
                for (double lj : l) den += std::exp(lj - m);
                for (int64_t i = 0; i < k.r; ++i) {
                    double mass = 0;
                    for (size_t j = 0; j < l.size(); ++j) mass += std::exp(l[j] - m) / den * std::fabs(ent[j][static_cast<size_t>(i)]);
                    if (!std::isfinite(mass)) mass = 0;  // σ = +inf or a lonely row: exact 0 on both sides
                    const double w = want.get(t, h, i);
                    double e = (2 * eps + gamma_n(static_cast<double>(l.size()) + 4)) * mass + 2 * kU * std::fabs(w) + 1e-30;
                    if (k.out_type == DType::bf16) e += bf16_ulp(std::fabs(w) + e);
                    tol.push_back(e);
                }
            }
        for (auto& nb : backends) {
            RowsTensor got(ol, k.out_type);
            auto p = params(got.data());
            GuardedBuffer ws(std::max<size_t>(1, nb.backend->sparse_mla_attention_workspace_size(p)));
            const Status st = nb.backend->sparse_mla_attention(p, {ws.data(), nb.backend->sparse_mla_attention_workspace_size(p)});
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            EXPECT_TRUE(all_close(want.values(), got.values(), tol, nb.spec));
            EXPECT_TRUE(got.intact(nb.spec));
            EXPECT_TRUE(ws.guards_intact(nb.spec + " workspace"));
        }
    }
}

// Hand-computed values (ops/sparse_mla.h semantics), R = 2, Dr = 1, f32 cache, on every backend and ref.
TEST(SparseMlaAttention, KnownValues) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    GuardedCache cache(1, 4, entry_bytes(CacheRecordFormat::f32, 2, 1));
    // Entries: c = (1, 0), (0, 1), (2, 2); rope dim 1 holds the logit driver.
    const float entries[4][3] = {{1, 0, 0}, {0, 1, static_cast<float>(std::log(3.0))}, {2, 2, 0}, {5, 5, 100}};
    std::memcpy(cache.buf.data(), entries, sizeof(entries));
    const float q[3] = {0, 0, 1};  // logit of entry j = scale · rope_j; scale 1
    struct Known {
        std::vector<int32_t> slots;
        float sink;  // NaN: no sink
        float want0, want1;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<Known> known = {
        {{0, -1}, nan, 1.0f, 0.0f},                        // one entry: its c
        {{0, 1}, nan, 0.25f, 0.75f},                       // logits 0 and ln 3: weights 1/4, 3/4
        {{0, 0, 2}, nan, 4.0f / 3, 2.0f / 3},              // a slot listed twice counts twice
        {{0}, 0.0f, 0.5f, 0.0f},                           // sink logit 0 = the entry's: 1/(1 + e^0)
        {{0, 1}, static_cast<float>(std::log(4.0)), 0.125f, 0.375f},  // den 1 + 3 + 4
        {{-1, -1}, 0.0f, 0.0f, 0.0f},                      // lonely row: 0 even with a sink
        {{0, 1}, kInf, 0.0f, 0.0f},                        // σ = +inf: 0
        {{0, 1}, -kInf, 0.25f, 0.75f},                     // σ = −inf: no effect
        {{3, 0}, nan, 5.0f, 5.0f},                         // logit 100 vs 0: overflow-safe (max subtracted)
    };
    for (auto& nb : backends) {
        for (size_t i = 0; i < known.size(); ++i) {
            const Known& kn = known[i];
            SCOPED_TRACE(fmt::format("{} case {}", nb.spec, i));
            float out[2] = {-1, -1};
            SparseMlaAttentionParams p;
            p.q = q;
            p.cache = cache.view;
            p.n_slots = 4;
            p.slots = kn.slots.data();
            p.sink = std::isnan(kn.sink) ? nullptr : &kn.sink;
            p.out = out;
            p.scale = 1.0f;
            p.n_tokens = 1;
            p.n_heads = 1;
            p.kv_lora_rank = 2;
            p.rope_dim = 1;
            p.topk = static_cast<int64_t>(kn.slots.size());
            p.q_token_stride = 3;
            p.q_head_stride = 3;
            p.slots_row_stride = p.topk;
            p.out_token_stride = 2;
            p.out_head_stride = 2;
            std::vector<uint8_t> ws(nb.backend->sparse_mla_attention_workspace_size(p) + 64);
            void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
            ASSERT_TRUE(nb.backend->sparse_mla_attention(p, {aligned, nb.backend->sparse_mla_attention_workspace_size(p)}).is_ok());
            EXPECT_NEAR(out[0], kn.want0, 1e-6);
            EXPECT_NEAR(out[1], kn.want1, 1e-6);
        }
    }
}

// Non-finite inputs give non-finite outputs and only an empty row gives 0 (ops/sparse_mla.h), on ref and
// every backend, for both cache formats and q types, with and without a sink, over three chunks of 64
// listed entries. Cache slots 0-2 are corrupted: a NaN latent value (or e4m3 NaN byte), a NaN rope value,
// and an infinite latent value (fp8: a huge block scale, FLT_MAX · e4m3 overflowing to inf). Tokens:
//   0 clean entries: finite          1 no valid entry: exactly 0 (sink or not)
//   2 NaN in head 3's rope part of q: head 3 NaN     3 NaN in head 0's latent part of q: head 0 NaN
//   4 slot 0 listed first: NaN       5 slot 1 listed last, in the third chunk: NaN
//   6 slot 2 listed: non-finite      and a NaN sink of head 2: head 2 NaN in every non-empty token.
TEST(SparseMlaAttention, NonFiniteInputsGiveNonFiniteOutputsAndEmptyRowsZero) {
    auto backends = backends_under_test();
    backends.push_back({"ref", ref_backend()});
    auto ref = ref_backend();
    Rng rng(7104);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t r = 512, dr = 64, dqk = r + dr, H = 16, T = 7, K = 150, block_size = 16, n_blocks = 16;
    for (const auto format : {CacheRecordFormat::f32, CacheRecordFormat::fp8_v32})
        for (const DType q_type : {DType::f32, DType::bf16})
            for (const int sink_kind : {0, 1, 2}) {  // none, finite, finite with head 2 NaN
                SCOPED_TRACE(fmt::format("{} q {} sink {}", cache_record_format_name(format), dtype_name(q_type),
                                         sink_kind));
                GuardedCache cache(n_blocks, block_size, entry_bytes(format, r, dr));
                fill_cache(*ref, cache, format, r, dr, rng);
                auto entry = [&](int64_t slot) {
                    return cache.buf.as<uint8_t>() + (slot / block_size) * cache.view.block_bytes +
                           (slot % block_size) * cache.view.entry_bytes;
                };
                const int64_t g = CacheRecordLayout{format, r + dr, dr}.group_size();
                if (format == CacheRecordFormat::f32) {
                    const float inf = kInf;
                    std::memcpy(entry(0) + 4 * 17, &nan, 4);        // latent dim 17
                    std::memcpy(entry(1) + 4 * (r + 9), &nan, 4);   // rope dim 9
                    std::memcpy(entry(2) + 4 * 300, &inf, 4);       // latent dim 300
                } else {
                    entry(0)[17] = 0x7f;                            // e4m3 NaN byte
                    const uint16_t nan_bf16 = f32_to_bf16(nan);
                    std::memcpy(entry(1) + r + 4 * (r / g) + 2 * 9, &nan_bf16, 2);
                    const float huge = std::numeric_limits<float>::max();
                    std::memcpy(entry(2) + r + 4 * 2, &huge, 4);    // the scale of latent dims [256, 384)
                }
                RowsLayout ql{T, H, dqk, H * dqk, dqk};
                RowsTensor q(ql, q_type);
                q.fill([&] { return rng.normal(1.0f); });
                auto poison_q = [&](int64_t tk, int64_t h, int64_t i) {
                    if (q_type == DType::bf16)
                        q.buf.as<uint16_t>()[ql.offset(tk, h, i)] = f32_to_bf16(nan);
                    else
                        q.buf.as<float>()[ql.offset(tk, h, i)] = nan;
                };
                poison_q(2, 3, r + 5);
                poison_q(3, 0, 7);
                std::vector<int32_t> slots(static_cast<size_t>(T * K), -1);
                for (int64_t tk = 0; tk < T; ++tk) {
                    if (tk == 1) continue;  // the empty row
                    for (int64_t j = 0; j < K; ++j)
                        if (!rng.coin(0.1)) slots[static_cast<size_t>(tk * K + j)] = static_cast<int32_t>(rng.integer(3, cache.n_slots() - 1));
                }
                slots[static_cast<size_t>(4 * K)] = 0;
                slots[static_cast<size_t>(5 * K + K - 1)] = 1;
                slots[static_cast<size_t>(6 * K + 40)] = 2;
                std::vector<float> sink(static_cast<size_t>(H));
                for (auto& v : sink) v = rng.normal(2.0f);
                if (sink_kind == 2) sink[2] = nan;
                auto expect = [&](int64_t tk, int64_t h) {
                    if (tk == 1) return RowExpect::zero;
                    if (tk >= 4) return tk == 6 ? RowExpect::non_finite : RowExpect::nan;
                    if ((tk == 2 && h == 3) || (tk == 3 && h == 0) || (sink_kind == 2 && h == 2)) return RowExpect::nan;
                    return RowExpect::finite;
                };
                for (auto& nb : backends) {
                    const RowsLayout ol{T, H, r, H * r, r};
                    RowsTensor out(ol, DType::f32);
                    SparseMlaAttentionParams p;
                    p.q = q.data();
                    p.cache = cache.view;
                    p.n_slots = cache.n_slots();
                    p.slots = slots.data();
                    p.sink = sink_kind ? sink.data() : nullptr;
                    p.out = out.data();
                    p.scale = 0.05f;
                    p.n_tokens = T;
                    p.n_heads = H;
                    p.kv_lora_rank = r;
                    p.rope_dim = dr;
                    p.topk = K;
                    p.q_token_stride = H * dqk;
                    p.q_head_stride = dqk;
                    p.slots_row_stride = K;
                    p.out_token_stride = H * r;
                    p.out_head_stride = r;
                    p.format = format;
                    p.q_type = q_type;
                    const size_t ws_bytes = nb.backend->sparse_mla_attention_workspace_size(p);
                    GuardedBuffer ws(std::max<size_t>(1, ws_bytes));
                    const Status st = nb.backend->sparse_mla_attention(p, {ws.data(), ws_bytes});
                    ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                    for (int64_t tk = 0; tk < T; ++tk)
                        for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(row_is(out, tk, h, expect(tk, h), nb.spec));
                    EXPECT_TRUE(out.intact(nb.spec));
                }
            }
}

TEST(SparseMlaValidate, RejectsMalformedCalls) {
    GuardedCache cache(2, 4, entry_bytes(CacheRecordFormat::f32, 8, 2));
    std::vector<float> q(2 * 10, 0.0f), out(2 * 8, 0.0f);
    std::vector<int32_t> slots = {0, 7, -1, 3};
    auto base = [&] {
        SparseMlaAttentionParams p;
        p.q = q.data();
        p.cache = cache.view;
        p.n_slots = cache.n_slots();
        p.slots = slots.data();
        p.out = out.data();
        p.scale = 0.5f;
        p.n_tokens = 2;
        p.n_heads = 1;
        p.kv_lora_rank = 8;
        p.rope_dim = 2;
        p.topk = 2;
        p.q_token_stride = 10;
        p.q_head_stride = 10;
        p.slots_row_stride = 2;
        p.out_token_stride = 8;
        p.out_head_stride = 8;
        return p;
    };
    EXPECT_TRUE(validate(base()).is_ok());
    auto expect_bad = [&](SparseMlaAttentionParams p, StatusCode code, const char* needle) {
        const Status s = validate(p);
        EXPECT_EQ(s.code(), code) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
    };
    // Found by check_indices (the slots, and the cache view only checked when a slot is listed):
    // validate (which reads no array) accepts.
    auto expect_bad_indices = [&](SparseMlaAttentionParams p, StatusCode code, const char* needle) {
        EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
        for (const Status& s : {check_indices(p), validate_and_check_indices(p)}) {
            EXPECT_EQ(s.code(), code) << s.to_string();
            EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
        }
    };
    auto p = base();
    slots[1] = 8;
    expect_bad_indices(p, StatusCode::invalid_argument, "slots[0, 1] = 8");
    slots[1] = -2;
    expect_bad_indices(p, StatusCode::invalid_argument, "slots[0, 1] = -2");
    slots[1] = 7;
    p = base();
    p.scale = 0.0f;
    expect_bad(p, StatusCode::invalid_argument, "scale");
    p = base();
    p.cache.entry_bytes = 36;
    expect_bad_indices(p, StatusCode::invalid_argument, "entry_bytes = 36");
    p = base();
    p.format = CacheRecordFormat::fp8_v32;
    p.kv_lora_rank = 192;  // not a multiple of its 128-value scale group
    expect_bad(p, StatusCode::unsupported, "kv_lora_rank = 192");
    p = base();
    p.out = q.data();  // overlaps q
    expect_bad(p, StatusCode::invalid_argument, "overlap");
    p = base();
    p.out_token_stride = 4;  // output rows overlap
    expect_bad(p, StatusCode::invalid_argument, "out_token_stride");
    p = base();
    p.q_type = DType::f8_e4m3;
    expect_bad(p, StatusCode::invalid_argument, "q_type");
    p = base();
    p.n_slots = 6;  // not whole blocks
    slots[1] = 3;
    expect_bad_indices(p, StatusCode::invalid_argument, "n_slots = 6");
}

}  // namespace
}  // namespace sieve::test

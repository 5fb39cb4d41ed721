// ops/cache_store.h and ops/kv_load.h over every format of ops/cache_record.h: the bytes each backend
// (ref and every cpu variant) writes equal an image built independently here from the layout rules
// (groups quantized through the quant_fp8 op, placed by deepseek_v4.md §4.1 / §4.3, dsa_mla.md §3.3 /
// §3.4 and qsa.md §5), including sub-rows at an entry_offset, skipped slots, strided rows, NaN / inf
// groups and the bf16 rounding of V4 rows; loads return the independent dequantization; the byte counts
// of the spec records; hand-computed bytes; validate() and check_indices() rejections.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/quant_fp8.h"
#include "paged_cache.h"

namespace sieve::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CacheRecordLayout, ByteCountsOfTheSpecRecords) {
    // deepseek_v4.md §4.1: 448 fp8 + 64·2 bf16 + 7 scales + 1 pad = 584; data part 576.
    const CacheRecordLayout model1{CacheRecordFormat::fp8_model1, 512, 64};
    EXPECT_EQ(model1.data_bytes(), 576);
    EXPECT_EQ(model1.scale_bytes(), 8);
    EXPECT_EQ(model1.entry_bytes(), 584);
    // The V4 test model: quant_dim 24 in one partial tile, scales padded to 8.
    const CacheRecordLayout small{CacheRecordFormat::fp8_model1, 32, 8};
    EXPECT_EQ(small.n_groups(), 1);
    EXPECT_EQ(small.entry_bytes(), 24 + 16 + 8);
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::fp8_model1, 600, 24}.scale_bytes()), 16);  // 9 tiles
    // deepseek_v4.md §4.3 = dsa_mla.md §3.3: 128 fp8 + one fp32 scale = 132; the DSA fixtures' Di = 16.
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::fp8_row_scale, 128, 0}.entry_bytes()), 132);
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::fp8_row_scale, 16, 0}.entry_bytes()), 20);
    // dsa_mla.md §3.4: 512 e4m3 + 4 fp32 scales + 64 bf16 = 656; the DSA fixtures' 32 + 8.
    const CacheRecordLayout v32{CacheRecordFormat::fp8_v32, 576, 64};
    EXPECT_EQ(v32.entry_bytes(), 656);
    EXPECT_EQ(v32.group_size(), 128);
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::fp8_v32, 40, 8}.entry_bytes()), 32 + 4 + 16);
    // Plain rows.
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::f32, 512, 64}.entry_bytes()), 2048);
    EXPECT_EQ((CacheRecordLayout{CacheRecordFormat::bf16, 2 * 2 * 256, 0}.entry_bytes()), 2048);  // QSA K|V, §5.1
    for (CacheRecordFormat f : {CacheRecordFormat::f32, CacheRecordFormat::bf16, CacheRecordFormat::fp8_row_scale,
                                CacheRecordFormat::fp8_model1, CacheRecordFormat::fp8_v32})
        EXPECT_NE(cache_record_format_name(f), "?");
}

struct StoreCase {
    CacheRecordLayout layout;
    int64_t block_size, n_blocks, n_rows;
    DType x_type;
    bool round_bf16;
    int64_t dim = 0, entry_offset = 0;  // dim 0: layout.dim
    bool specials = false;              // NaN, ±inf and bf16-overflowing values in some rows
};

// Rows of varied magnitudes (e4m3-subnormal members, all-zero groups) and, with specials, a NaN, an
// infinity and 3.4e38 (finite in f32, inf once rounded to bf16) in separate rows.
std::vector<float> make_rows(Rng& rng, int64_t n_rows, int64_t stride, bool specials) {
    std::vector<float> x(static_cast<size_t>(n_rows * stride), 77.0f);  // the stride padding is never read
    for (int64_t r = 0; r < n_rows; ++r) {
        const float mag = std::ldexp(1.0f, static_cast<int>(rng.integer(-12, 12)));
        for (int64_t i = 0; i < stride; ++i) {
            float v = rng.normal(mag);
            if (rng.coin(0.05)) v *= 1e-4f;
            if (r % 5 == 3 && i < 64) v = 0.0f;
            x[static_cast<size_t>(r * stride + i)] = v;
        }
    }
    if (specials && n_rows > 4) {
        x[static_cast<size_t>(0 * stride + 1)] = kNaN;
        x[static_cast<size_t>(2 * stride + 0)] = -kInf;
        x[static_cast<size_t>(4 * stride + 2)] = 3.4e38f;
    }
    return x;
}

// Quantizes one group with the quant_fp8 op of the ref backend: codes, ue8m0 byte and fp32 scale.
struct GroupQuant {
    std::vector<uint8_t> q;
    uint8_t e = 0;
    float s = 0;
};
GroupQuant quant_group(Backend& ref, const std::vector<float>& v) {
    GroupQuant g;
    g.q.resize(v.size());
    QuantFp8Params p;
    p.x = v.data();
    p.q = g.q.data();
    p.scale_ue8m0 = &g.e;
    p.scale_f32 = &g.s;
    p.n_tokens = 1;
    p.dim = static_cast<int64_t>(v.size());
    p.group_size = p.dim;
    EXPECT_TRUE(ref.quant_fp8(p).is_ok());
    return g;
}

void put_u16(uint8_t* p, uint16_t b) {
    p[0] = static_cast<uint8_t>(b & 0xff);
    p[1] = static_cast<uint8_t>(b >> 8);
}

// The cache image after storing rows x (row stride `stride`) at `slots`, from the layout rules alone (no
// helper of ops/cache_record.h).
std::vector<uint8_t> expected_image(Backend& ref, const StoreCase& c, const PagedTestCache& cache, const std::vector<float>& x,
                                    int64_t stride, const std::vector<int32_t>& slots) {
    std::vector<uint8_t> img(cache.buf.bytes(), kPoison);
    const CacheRecordLayout& l = c.layout;
    const int64_t dim = c.dim ? c.dim : l.dim, bs = c.block_size;
    for (int64_t r = 0; r < c.n_rows; ++r) {
        const int32_t s = slots[static_cast<size_t>(r)];
        if (s < 0) continue;
        const int64_t j = s % bs;
        uint8_t* b = img.data() + (s / bs) * cache.block_bytes;
        std::vector<float> v(static_cast<size_t>(dim));
        for (int64_t i = 0; i < dim; ++i) {
            const float xi = x[static_cast<size_t>(r * stride + i)];
            v[static_cast<size_t>(i)] = c.round_bf16 && l.format != CacheRecordFormat::f32 ? round_to_bf16(xi) : xi;
        }
        switch (l.format) {
            case CacheRecordFormat::f32:
                std::memcpy(b + j * 4 * l.dim + 4 * c.entry_offset, x.data() + r * stride, static_cast<size_t>(dim) * 4);
                break;
            case CacheRecordFormat::bf16:
                for (int64_t i = 0; i < dim; ++i)
                    put_u16(b + j * 2 * l.dim + 2 * (c.entry_offset + i), f32_to_bf16(x[static_cast<size_t>(r * stride + i)]));
                break;
            case CacheRecordFormat::fp8_row_scale: {  // [bs·dim values][bs·4 fp32 scales]
                const GroupQuant g = quant_group(ref, v);
                std::memcpy(b + j * dim, g.q.data(), g.q.size());
                std::memcpy(b + bs * dim + 4 * j, &g.s, 4);
                break;
            }
            case CacheRecordFormat::fp8_model1: {  // data at j·(nope + 2·rope), scales at bs·data + j·scale_bytes
                const int64_t nope = dim - l.rope_dim, data_bytes = nope + 2 * l.rope_dim;
                const int64_t tiles = (nope + 63) / 64, scale_bytes = (tiles + 7) / 8 * 8;
                uint8_t* data = b + j * data_bytes;
                uint8_t* scales = b + bs * data_bytes + j * scale_bytes;
                for (int64_t g = 0; g < tiles; ++g) {
                    const int64_t g0 = g * 64, n = std::min<int64_t>(64, nope - g0);
                    const GroupQuant q = quant_group(ref, std::vector<float>(v.begin() + g0, v.begin() + g0 + n));
                    std::memcpy(data + g0, q.q.data(), static_cast<size_t>(n));
                    scales[g] = q.e;
                }
                for (int64_t g = tiles; g < scale_bytes; ++g) scales[g] = 0;
                for (int64_t i = 0; i < l.rope_dim; ++i) put_u16(data + nope + 2 * i, f32_to_bf16(v[static_cast<size_t>(nope + i)]));
                break;
            }
            case CacheRecordFormat::fp8_v32: {  // per entry [R e4m3 | R/g fp32 | rope bf16]
                const int64_t R = dim - l.rope_dim, g = std::min<int64_t>(128, R), G = R / g;
                const int64_t entry = R + 4 * G + 2 * l.rope_dim;
                uint8_t* e = b + j * entry;
                for (int64_t k = 0; k < G; ++k) {
                    const GroupQuant q = quant_group(ref, std::vector<float>(v.begin() + k * g, v.begin() + (k + 1) * g));
                    std::memcpy(e + k * g, q.q.data(), static_cast<size_t>(g));
                    std::memcpy(e + R + 4 * k, &q.s, 4);
                }
                for (int64_t i = 0; i < l.rope_dim; ++i) put_u16(e + R + 4 * G + 2 * i, f32_to_bf16(v[static_cast<size_t>(R + i)]));
                break;
            }
        }
    }
    return img;
}

// The fp32 values of an entry, decoded from the bytes by the layout rules (kv_load's expected result).
std::vector<double> decode_image(const std::vector<uint8_t>& img, const StoreCase& c, const PagedTestCache& cache, int32_t s) {
    const CacheRecordLayout& l = c.layout;
    std::vector<double> out(static_cast<size_t>(l.dim), 0.0);
    if (s < 0) return out;
    const int64_t j = s % c.block_size, bs = c.block_size;
    const uint8_t* b = img.data() + (s / bs) * cache.block_bytes;
    auto f32_at = [](const uint8_t* p) {
        float v;
        std::memcpy(&v, p, 4);
        return static_cast<double>(v);
    };
    auto bf16_at = [](const uint8_t* p) { return static_cast<double>(bf16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)))); };
    switch (l.format) {
        case CacheRecordFormat::f32:
            for (int64_t i = 0; i < l.dim; ++i) out[static_cast<size_t>(i)] = f32_at(b + j * 4 * l.dim + 4 * i);
            break;
        case CacheRecordFormat::bf16:
            for (int64_t i = 0; i < l.dim; ++i) out[static_cast<size_t>(i)] = bf16_at(b + j * 2 * l.dim + 2 * i);
            break;
        case CacheRecordFormat::fp8_row_scale: {
            const float sc = static_cast<float>(f32_at(b + bs * l.dim + 4 * j));
            for (int64_t i = 0; i < l.dim; ++i) out[static_cast<size_t>(i)] = fp8_e4m3_to_f32(b[j * l.dim + i]) * sc;
            break;
        }
        case CacheRecordFormat::fp8_model1: {
            const int64_t nope = l.dim - l.rope_dim, data_bytes = nope + 2 * l.rope_dim, sb = ((nope + 63) / 64 + 7) / 8 * 8;
            const uint8_t* data = b + j * data_bytes;
            const uint8_t* scales = b + bs * data_bytes + j * sb;
            for (int64_t i = 0; i < nope; ++i) out[static_cast<size_t>(i)] = fp8_e4m3_to_f32(data[i]) * ue8m0_to_f32(scales[i / 64]);
            for (int64_t i = 0; i < l.rope_dim; ++i) out[static_cast<size_t>(nope + i)] = bf16_at(data + nope + 2 * i);
            break;
        }
        case CacheRecordFormat::fp8_v32: {
            const int64_t R = l.dim - l.rope_dim, g = std::min<int64_t>(128, R), G = R / g;
            const uint8_t* e = b + j * (R + 4 * G + 2 * l.rope_dim);
            for (int64_t i = 0; i < R; ++i)
                out[static_cast<size_t>(i)] = fp8_e4m3_to_f32(e[i]) * static_cast<float>(f32_at(e + R + 4 * (i / g)));
            for (int64_t i = 0; i < l.rope_dim; ++i) out[static_cast<size_t>(R + i)] = bf16_at(e + R + 4 * G + 2 * i);
            break;
        }
    }
    return out;
}

TEST(CacheStoreConformance, EveryBackendWritesTheSpecifiedBytes) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4101);
    using F = CacheRecordFormat;
    const std::vector<StoreCase> cases = {
        {{F::fp8_model1, 512, 64}, 3, 4, 9, DType::f32, true, 0, 0, true},   // V4 release record, partial last block
        {{F::fp8_model1, 512, 64}, 64, 1, 5, DType::bf16, true},             // vLLM's block of 64
        {{F::fp8_model1, 32, 8}, 4, 3, 10, DType::f32, true, 0, 0, true},    // the V4 test model: one partial tile
        {{F::fp8_model1, 200, 8}, 2, 5, 7, DType::f32, true},                // 3 tiles, the last partial
        {{F::fp8_model1, 64, 64}, 3, 2, 4, DType::f32, true},                // no quantized dims at all
        {{F::fp8_model1, 72, 8}, 4, 2, 6, DType::f32, false, 0, 0, true},    // without the bf16 rounding
        {{F::fp8_row_scale, 128, 0}, 5, 3, 12, DType::f32, true, 0, 0, true},  // V4 indexer key (§4.3)
        {{F::fp8_row_scale, 16, 0}, 3, 3, 6, DType::bf16, true},
        {{F::fp8_row_scale, 128, 0}, 64, 2, 19, DType::f32, false, 0, 0, true},  // DSA indexer key (§3.3)
        {{F::fp8_row_scale, 20, 0}, 4, 3, 6, DType::bf16, false},
        {{F::fp8_row_scale, 1, 0}, 4, 2, 5, DType::f32, false},
        {{F::fp8_v32, 576, 64}, 16, 2, 7, DType::f32, false, 0, 0, true},    // the 656-byte record (§3.4)
        {{F::fp8_v32, 40, 8}, 4, 3, 9, DType::bf16, false},                  // the DSA fixtures' geometry
        {{F::fp8_v32, 48, 8}, 4, 3, 9, DType::f32, false, 0, 0, true},       // one group of 40 (< 128)
        {{F::fp8_v32, 320, 64}, 4, 3, 6, DType::f32, false},                 // 2 groups of 128
        {{F::fp8_v32, 128, 0}, 4, 2, 5, DType::bf16, false},                 // no rope dims
        {{F::fp8_v32, 416, 32}, 2, 4, 7, DType::f32, true, 0, 0, true},      // 3 groups, bf16-rounded rows
        {{F::f32, 32, 8}, 3, 3, 7, DType::f32, false, 0, 0, true},           // plain rows (rope_dim ignored)
        {{F::f32, 24, 0}, 2, 4, 5, DType::bf16, true},                       // round_bf16 changes nothing for f32
        {{F::f32, 40, 0}, 4, 3, 6, DType::f32, false, 13, 27},               // a sub-row ending at the entry's end
        {{F::bf16, 64, 0}, 16, 2, 11, DType::bf16, false, 16, 16, true},     // QSA: V of kv head 0 in [2, 2, 16]
        {{F::bf16, 64, 0}, 16, 2, 11, DType::f32, false, 16, 48},            // V of kv head 1, rounded to bf16
        {{F::bf16, 20, 0}, 3, 3, 8, DType::f32, false, 0, 0, true},          // a raw-key row (qsa.md §5.2)
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const StoreCase& c = cases[ci];
        const int64_t dim = c.dim ? c.dim : c.layout.dim, stride = dim + static_cast<int64_t>(ci % 3);
        SCOPED_TRACE(fmt::format("case {}: {} dim {} rope {} row {} at {} bs {} x {} round {}", ci,
                                 cache_record_format_name(c.layout.format), c.layout.dim, c.layout.rope_dim, dim,
                                 c.entry_offset, c.block_size, dtype_name(c.x_type), c.round_bf16));
        PagedTestCache want_cache(c.n_blocks, c.block_size, c.layout.entry_bytes(), 64);
        std::vector<float> x = make_rows(rng, c.n_rows, stride, c.specials);
        if (c.x_type == DType::bf16)
            for (float& v : x) v = round_to_bf16(v);
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
        std::vector<int32_t> slots = random_slots(rng, c.n_rows, want_cache.n_slots());
        slots[1] = -1;  // skipped
        const std::vector<uint8_t> img = expected_image(*ref, c, want_cache, x, stride, slots);

        auto run = [&](Backend& b, PagedTestCache& cache) {
            CacheStoreParams p;
            p.x = c.x_type == DType::bf16 ? static_cast<const void*>(xb.data()) : x.data();
            p.x_type = c.x_type;
            p.slots = slots.data();
            p.cache = cache.view();
            p.layout = c.layout;
            p.n_slots = cache.n_slots();
            p.n_rows = c.n_rows;
            p.dim = dim;
            p.entry_offset = c.entry_offset;
            p.x_row_stride = stride;
            p.round_bf16 = c.round_bf16;
            return b.cache_store(p);
        };
        const Status rs = run(*ref, want_cache);
        ASSERT_TRUE(rs.is_ok()) << rs.to_string();
        EXPECT_TRUE(bytes_equal(img.data(), want_cache.buf.data(), img.size(), "ref bytes"));
        EXPECT_TRUE(want_cache.buf.guards_intact("ref cache"));
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            PagedTestCache got(c.n_blocks, c.block_size, c.layout.entry_bytes(), 64);
            const Status st = run(*nb.backend, got);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(bytes_equal(img.data(), got.buf.data(), img.size(), "bytes"));
            EXPECT_TRUE(got.buf.guards_intact("cache"));
        }

        // Loads: every backend returns the independent decoding of the image (−1: zeros).
        std::vector<int32_t> load_slots = slots;
        load_slots.push_back(-1);
        const int64_t n_load = static_cast<int64_t>(load_slots.size()), ld = c.layout.dim;
        std::vector<double> want;
        for (int32_t s : load_slots) {
            const std::vector<double> row = decode_image(img, c, want_cache, s);
            want.insert(want.end(), row.begin(), row.end());
        }
        const std::vector<double> zero_tol(want.size(), 0.0);
        for (DType yt : {DType::f32, DType::bf16}) {
            std::vector<double> want_y = want;
            if (yt == DType::bf16)
                for (double& v : want_y) v = round_to_bf16(static_cast<float>(v));
            auto load_with = [&](Backend& b) -> std::vector<double> {
                GuardedBuffer y(static_cast<size_t>(n_load * ld) * dtype_size(yt));
                KvLoadParams p;
                p.cache = want_cache.view();
                p.layout = c.layout;
                p.slots = load_slots.data();
                p.y = y.data();
                p.y_type = yt;
                p.n_rows = n_load;
                p.y_row_stride = ld;
                const Status st = b.kv_load(p);
                EXPECT_TRUE(st.is_ok()) << st.to_string();
                EXPECT_TRUE(y.guards_intact("load y"));
                std::vector<double> out(static_cast<size_t>(n_load * ld));
                for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(y.data(), yt, static_cast<int64_t>(i));
                return out;
            };
            EXPECT_TRUE(all_close(want_y, load_with(*ref), zero_tol, "ref kv_load"));
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                EXPECT_TRUE(all_close(want_y, load_with(*nb.backend), zero_tol, "kv_load"));
            }
        }
    }
}

// QSA's main KV entry [Hkv, 2, D] filled by 2·Hkv sub-row stores (qsa.md §5.1): K of kv head g at 2g·D,
// V at (2g + 1)·D; the entry is then exactly [K0 | V0 | K1 | V1] in bf16, on every backend.
TEST(CacheStoreConformance, SubRowsFillQsaKvEntries) {
    auto backends = backends_under_test();
    backends.push_back({"ref", ref_backend()});
    Rng rng(4102);
    const int64_t T = 5, Hkv = 2, D = 8, N = 40;  // proj rows: [q … | k (Hkv·D) | v (Hkv·D) | …]
    const int64_t k_at = 3, v_at = k_at + Hkv * D;
    std::vector<float> proj(static_cast<size_t>(T * N));
    for (float& v : proj) v = rng.normal();
    const CacheRecordLayout l{CacheRecordFormat::bf16, 2 * Hkv * D, 0};
    const std::vector<int32_t> slots = {6, 0, 3, 7, 2};
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        PagedTestCache cache(2, 4, l.entry_bytes(), 64);
        for (int64_t g = 0; g < Hkv; ++g)
            for (int64_t kv = 0; kv < 2; ++kv) {
                CacheStoreParams p;
                p.x = proj.data() + (kv ? v_at : k_at) + g * D;
                p.x_row_stride = N;
                p.slots = slots.data();
                p.cache = cache.view();
                p.layout = l;
                p.n_slots = cache.n_slots();
                p.n_rows = T;
                p.dim = D;
                p.entry_offset = (2 * g + kv) * D;
                ASSERT_TRUE(nb.backend->cache_store(p).is_ok());
            }
        for (int64_t t = 0; t < T; ++t) {
            const uint8_t* e = cache.buf.as<uint8_t>() + (slots[static_cast<size_t>(t)] / 4) * cache.block_bytes +
                               (slots[static_cast<size_t>(t)] % 4) * l.entry_bytes();
            for (int64_t g = 0; g < Hkv; ++g)
                for (int64_t kv = 0; kv < 2; ++kv)
                    for (int64_t i = 0; i < D; ++i) {
                        uint16_t b;
                        std::memcpy(&b, e + 2 * ((2 * g + kv) * D + i), 2);
                        EXPECT_EQ(b, f32_to_bf16(proj[static_cast<size_t>(t * N + (kv ? v_at : k_at) + g * D + i)]))
                            << "token " << t << " head " << g << (kv ? " V " : " K ") << i;
                    }
        }
        const uint8_t* base = cache.buf.as<uint8_t>();
        for (int64_t s : {1, 4, 5})  // entries no row went to
            for (int64_t i = 0; i < l.entry_bytes(); ++i)
                ASSERT_EQ(base[(s / 4) * cache.block_bytes + (s % 4) * l.entry_bytes() + i], kPoison) << "slot " << s;
        EXPECT_TRUE(cache.buf.guards_intact(nb.spec));
    }
}

TEST(CacheStoreKnownValues, Model1OnesAndPoison) {
    // A row whose 64 quantized dims are all 1.0: amax 1 → s = 2^ceil(log2(1/448)) = 2^-8 (ue8m0 byte 119 =
    // 0x77), 1/s = 256 = 2^8 → e4m3 exponent field 8 + 7 = 15, mantissa 0 → 0x78. Rope dim 0.5 → bf16 0x3f00.
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 72, 8};
    for (auto& nb : backends) {
        Backend* b = nb.backend.get();
        SCOPED_TRACE(nb.spec);
        std::vector<float> x(72, 1.0f);
        for (int i = 64; i < 72; ++i) x[static_cast<size_t>(i)] = 0.5f;
        PagedTestCache cache(1, 2, l.entry_bytes(), 64);
        const int32_t slot = 1;
        CacheStoreParams p;
        p.x = x.data();
        p.slots = &slot;
        p.cache = cache.view();
        p.layout = l;
        p.n_slots = 2;
        p.n_rows = 1;
        p.dim = 72;
        p.round_bf16 = true;
        ASSERT_TRUE(b->cache_store(p).is_ok());
        const uint8_t* base = cache.buf.as<uint8_t>();
        const int64_t data = 64 + 16;  // bytes of one entry's data
        for (int i = 0; i < 64; ++i) EXPECT_EQ(base[data + i], 0x78) << i;
        for (int i = 0; i < 8; ++i) {
            EXPECT_EQ(base[data + 64 + 2 * i], 0x00);
            EXPECT_EQ(base[data + 64 + 2 * i + 1], 0x3f);
        }
        EXPECT_EQ(base[2 * data + 8], 0x77);  // entry 1's scale bytes after both entries' data
        for (int i = 1; i < 8; ++i) EXPECT_EQ(base[2 * data + 8 + i], 0x00);
        for (int i = 0; i < data; ++i) EXPECT_EQ(base[i], kPoison) << "entry 0 data written at " << i;
        for (int i = 0; i < 8; ++i) EXPECT_EQ(base[2 * data + i], kPoison) << "entry 0 scales written";

        // A NaN in the tile poisons it loudly: scale byte 0xFF, every code a NaN code; loads give NaN.
        x[3] = -kNaN;
        ASSERT_TRUE(b->cache_store(p).is_ok());
        EXPECT_EQ(base[2 * data + 8], 0xff);
        EXPECT_EQ(base[data + 3], 0xff);
        EXPECT_EQ(base[data + 4], 0x7f);
        float y[72];
        KvLoadParams lp;
        lp.cache = cache.view();
        lp.layout = l;
        lp.slots = &slot;
        lp.y = y;
        lp.n_rows = 1;
        ASSERT_TRUE(b->kv_load(lp).is_ok());
        EXPECT_TRUE(std::isnan(y[0]));
        EXPECT_EQ(y[64], 0.5f);

        // 3.4e38 is finite in f32 but rounds to +inf in bf16: the rounded row's tile is poisoned, the
        // unrounded one is not (scale 2^120, the largest UE8M0 power the amax clamp reaches).
        x[3] = 3.4e38f;
        ASSERT_TRUE(b->cache_store(p).is_ok());
        EXPECT_EQ(base[2 * data + 8], 0xff);
        p.round_bf16 = false;
        ASSERT_TRUE(b->cache_store(p).is_ok());
        EXPECT_EQ(base[2 * data + 8], 127 + 120);
        EXPECT_EQ(base[data + 3], 0x78);  // 3.4e38 / 2^120 ≈ 255.8 rounds to 256 = 1.000·2^8: e4m3 0x78
        EXPECT_EQ(base[data + 4], 0x00);  // 1 / 2^120 underflows e4m3
    }
}

// dsa_mla.md §3.4: bytes [0, 512) e4m3 latent, [512, 528) four fp32 UE8M0 scales (tile i covers
// [128i, 128i + 128)), [528, 656) 64 bf16 rope values; 656 bytes per token, entries back to back in a
// block. Checked for every backend at a slot inside the second block.
TEST(CacheStoreKnownValues, FlashMlaV32RecordByteByByte) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    Rng rng(7102);
    std::vector<float> row(576);
    // Tile amaxes: 1.0 (scale 2^-8: 1/448 rounds up), 448·2^-3 (exactly a power of two: 2^-3), 3e5, 2e-3.
    const float amax[4] = {1.0f, 448.0f / 8.0f, 3e5f, 2e-3f};
    for (int g = 0; g < 4; ++g)
        for (int j = 0; j < 128; ++j) row[static_cast<size_t>(128 * g + j)] = j == 5 ? -amax[g] : rng.uniform(-amax[g], amax[g]);
    for (int j = 0; j < 64; ++j) row[static_cast<size_t>(512 + j)] = rng.normal(2.0f);
    const float want_scale[4] = {std::ldexp(1.0f, -8), std::ldexp(1.0f, -3), std::ldexp(1.0f, 10), std::ldexp(1.0f, -17)};
    for (int g = 0; g < 4; ++g)  // the rule itself: 2^ceil(log2(amax / 448))
        ASSERT_EQ(want_scale[g], static_cast<float>(std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(amax[g] / 448.0))))));
    const int32_t slot = 64 + 6;  // block 1, offset 6
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        PagedTestCache cache(3, 64, 656, 0);
        ASSERT_EQ(cache.block_bytes, 64 * 656);
        CacheStoreParams p;
        p.x = row.data();
        p.slots = &slot;
        p.cache = cache.view();
        p.layout = {CacheRecordFormat::fp8_v32, 576, 64};
        p.n_slots = cache.n_slots();
        p.n_rows = 1;
        p.dim = 576;
        ASSERT_TRUE(nb.backend->cache_store(p).is_ok());
        const uint8_t* rec = cache.buf.as<uint8_t>() + 1 * 64 * 656 + 6 * 656;
        for (int g = 0; g < 4; ++g) {
            float s;
            std::memcpy(&s, rec + 512 + 4 * g, 4);
            EXPECT_EQ(s, want_scale[g]) << "scale of tile " << g;
            for (int j = 0; j < 128; ++j) {
                const float x = row[static_cast<size_t>(128 * g + j)];
                const uint8_t b = rec[128 * g + j];
                EXPECT_EQ(b, f32_to_fp8_e4m3(x / want_scale[g])) << "latent byte " << 128 * g + j;
                // e4m3 keeps 3 mantissa bits: |dequant − x| ≤ 2^-4·|x| (normals) or half a subnormal step.
                EXPECT_LE(std::fabs(fp8_e4m3_to_f32(b) * want_scale[g] - x),
                          std::max(std::fabs(x) / 16.0f, std::ldexp(1.0f, -10) * want_scale[g]));
            }
        }
        EXPECT_EQ(rec[5], 0xf8) << "−amax/scale of tile 0 is −1/2^-8 = −256 = −1.000·2^8 → e4m3 0xF8";
        EXPECT_EQ(rec[128 + 5], 0xfe) << "−(448/8)/(2^-3) = −448 → e4m3 0xFE";
        for (int j = 0; j < 64; ++j) {
            uint16_t b;
            std::memcpy(&b, rec + 528 + 2 * j, 2);
            EXPECT_EQ(b, f32_to_bf16(row[static_cast<size_t>(512 + j)])) << "rope value " << j;
        }
        // Nothing else in the cache was written.
        const uint8_t* base = cache.buf.as<uint8_t>();
        for (size_t i = 0; i < cache.buf.bytes(); ++i)
            if (base + i < rec || base + i >= rec + 656) {
                ASSERT_EQ(base[i], kPoison) << "byte " << i << " outside the record";
            }
        EXPECT_TRUE(cache.buf.guards_intact(nb.spec));
    }
}

TEST(CacheStoreValidate, RejectsMalformedCalls) {
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 512, 64};
    PagedTestCache cache(2, 4, l.entry_bytes(), 64);
    float x[2 * 512] = {};
    int32_t slots[2] = {0, 7};
    auto base = [&] {
        CacheStoreParams p;
        p.x = x;
        p.slots = slots;
        p.cache = cache.view();
        p.layout = l;
        p.n_slots = cache.n_slots();
        p.n_rows = 2;
        p.dim = 512;
        p.x_row_stride = 512;
        return p;
    };
    auto expect_bad = [](const CacheStoreParams& p, StatusCode code, const std::string& needle) {
        const Status s = validate(p);
        EXPECT_EQ(s.code(), code) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
        EXPECT_EQ(validate_and_check_indices(p).message(), s.message());
    };
    auto expect_bad_indices = [](const CacheStoreParams& p, const std::string& needle) {
        EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
        const Status s = check_indices(p);
        EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
    };
    EXPECT_TRUE(validate_and_check_indices(base()).is_ok());
    CacheStoreParams p = base();
    p.cache.entry_bytes = 576;
    expect_bad(p, StatusCode::invalid_argument, "entry_bytes = 576");
    p = base();
    p.layout.rope_dim = 63;
    expect_bad(p, StatusCode::invalid_argument, "rope_dim = 63");
    p = base();
    p.dim = 448;  // an fp8 row is the whole entry
    expect_bad(p, StatusCode::invalid_argument, "dim = 448");
    p = base();
    p.x_type = DType::i32;
    expect_bad(p, StatusCode::invalid_argument, "x_type");
    p = base();
    p.n_slots = 6;  // not whole blocks
    expect_bad(p, StatusCode::invalid_argument, "n_slots = 6");
    p = base();
    p.x = cache.buf.data();  // the rows inside the cache they are written to
    expect_bad(p, StatusCode::invalid_argument, "overlap");
    p = base();
    p.x = nullptr;
    expect_bad(p, StatusCode::invalid_argument, "x");
    p = base();
    p.x_row_stride = -1;
    expect_bad(p, StatusCode::invalid_argument, "stride");
    p = base();
    p.cache.block_bytes = 100;
    expect_bad(p, StatusCode::invalid_argument, "block_bytes = 100");
    // Slots: −1 skips; −2 and past the cache are refused by check_indices only.
    slots[1] = -1;
    EXPECT_TRUE(validate_and_check_indices(base()).is_ok());
    slots[1] = -2;
    expect_bad_indices(base(), "slots[1] = -2");
    slots[1] = 8;
    expect_bad_indices(base(), "slots[1] = 8");
    slots[1] = 7;

    // Layouts the formats cannot hold.
    PagedTestCache v32(1, 4, CacheRecordLayout{CacheRecordFormat::fp8_v32, 200, 8}.entry_bytes(), 64);
    p = base();
    p.cache = v32.view();
    p.n_slots = 4;
    p.layout = {CacheRecordFormat::fp8_v32, 200, 8};  // 192 quantized values: not whole groups of 128
    p.dim = 200;
    expect_bad(p, StatusCode::unsupported, "192 quantized values");
    p.layout = {CacheRecordFormat::fp8_row_scale, 129, 0};
    p.dim = 129;
    expect_bad(p, StatusCode::unsupported, "dim = 129");

    // Plain sub-rows stay inside the entry.
    const CacheRecordLayout pl{CacheRecordFormat::bf16, 32, 0};
    PagedTestCache plain(2, 4, pl.entry_bytes(), 64);
    p = base();
    p.cache = plain.view();
    p.layout = pl;
    p.dim = 8;
    p.entry_offset = 24;
    p.x_row_stride = 8;
    EXPECT_TRUE(validate_and_check_indices(p).is_ok());
    p.entry_offset = 25;
    expect_bad(p, StatusCode::invalid_argument, "entry_offset = 25");
    p.entry_offset = -1;
    expect_bad(p, StatusCode::invalid_argument, "entry_offset = -1");
    p.entry_offset = 0;
    p.dim = 0;
    expect_bad(p, StatusCode::invalid_argument, "dim = 0");

    KvLoadParams lp;
    float y[512];
    lp.cache = cache.view();
    lp.layout = l;
    lp.slots = slots;
    lp.y = y;
    lp.n_rows = 1;
    slots[0] = -2;
    EXPECT_TRUE(validate(lp).is_ok());
    EXPECT_NE(check_indices(lp).message().find("kv_load: slots[0] = -2"), std::string::npos) << check_indices(lp).message();
    slots[0] = 0;
}

CacheStoreParams key_write(const PagedTestCache& cache, CacheRecordFormat f, int64_t d, const void* k,
                           DType kt, int64_t stride, const int32_t* slots, int64_t n) {
    CacheStoreParams p;
    p.x = k;
    p.slots = slots;
    p.cache = cache.view();
    p.layout = {f, d, 0};
    p.n_slots = cache.n_slots();
    p.n_rows = n;
    p.dim = d;
    p.x_row_stride = stride;
    p.x_type = kt;
    return p;
}
int64_t key_entry_bytes(CacheRecordFormat f, int64_t d) { return CacheRecordLayout{f, d, 0}.entry_bytes(); }

// The indexer key caches' two formats (f32, fp8_row_scale: DeepSeek-V4 §4.3 and DSA §3.3, one layout)
// through paged slots, with skipped slots and poisoned rows: every backend's bytes equal ref's.
TEST(CacheStoreConformance, IndexerKeysMatchRefBitForBit) {
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
        PagedTestCache want(n_blocks, block_size, entry, 64);
        ASSERT_TRUE(ref->cache_store(key_write(want, f, d, k.data(), kt, stride, slots.data(), n_tok)).is_ok());
        for (auto& nb : backends) {
            PagedTestCache got(n_blocks, block_size, entry, 64);
            const Status st = nb.backend->cache_store(key_write(got, f, d, k.data(), kt, stride, slots.data(), n_tok));
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            EXPECT_TRUE(bytes_equal(want.buf.data(), got.buf.data(), want.buf.bytes(), nb.spec));
            EXPECT_TRUE(got.buf.guards_intact(nb.spec));
        }
    }
}

// dsa_mla.md §3.3 with Di = 128, B = 64: a block is 64·132 bytes; token i's 128 e4m3 values at
// blk·B·132 + i·128, its fp32 scale at blk·B·132 + B·128 + 4·i; the scale is 2^ceil(log2(amax/448)).
TEST(CacheStoreKnownValues, DeepGemmIndexerKeyBlockByteByByte) {
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
        PagedTestCache cache(3, B, 132);
        ASSERT_EQ(cache.view().block_bytes, B * 132);
        ASSERT_TRUE(nb.backend
                        ->cache_store(key_write(cache, CacheRecordFormat::fp8_row_scale, d, k.data(),
                                                          DType::f32, d, slots, 3))
                        .is_ok());
        const uint8_t* base = cache.buf.as<uint8_t>();
        std::vector<bool> written(cache.buf.bytes(), false);
        for (int t = 0; t < 3; ++t) {
            const int64_t blk = slots[t] / B, off = slots[t] % B;
            const int64_t value_at = blk * B * 132 + off * 128, scale_at = blk * B * 132 + B * 128 + 4 * off;
            EXPECT_EQ(value_at, cache_record_data(cache.view(), {CacheRecordFormat::fp8_row_scale, d}, slots[t]) - cache.view().base);
            EXPECT_EQ(scale_at, cache_record_scales(cache.view(), {CacheRecordFormat::fp8_row_scale, d}, slots[t]) - cache.view().base);
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

// An indexer key store past the cache's slots, or with a slot below −1, is refused by check_indices and
// by every backend whose index arrays the host reads (a GPU's kernels skip such a slot: backend.h).
TEST(CacheStoreValidate, IndexerKeySlotsInsideTheCache) {
    PagedTestCache cache(2, 4, key_entry_bytes(CacheRecordFormat::f32, 4));
    auto ref = ref_backend();
    std::vector<float> k(2 * 4);
    std::vector<int32_t> slots = {0, 8};  // the cache has 8 slots
    const CacheStoreParams kw = key_write(cache, CacheRecordFormat::f32, 4, k.data(), DType::f32, 4, slots.data(), 2);
    EXPECT_TRUE(validate(kw).is_ok()) << validate(kw).to_string();
    for (const Status& s : {check_indices(kw), validate_and_check_indices(kw), ref->cache_store(kw)})
        EXPECT_NE(s.message().find("slots[1] = 8, expected −1 or a slot in [0, 8)"), std::string::npos) << s.to_string();
    for (auto& nb : backends_under_test()) {
        if (nb.spec.starts_with("cuda")) continue;
        EXPECT_NE(nb.backend->cache_store(kw).message().find("slots[1] = 8"), std::string::npos) << nb.spec;
    }
    slots[1] = -2;
    EXPECT_NE(check_indices(kw).message().find("slots[1] = -2"), std::string::npos) << check_indices(kw).to_string();
    slots[1] = 7;
    EXPECT_TRUE(validate_and_check_indices(kw).is_ok());
}

}  // namespace
}  // namespace sieve::test

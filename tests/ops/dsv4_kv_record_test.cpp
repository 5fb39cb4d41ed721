// ops/kv_record.h: the fp8_ds_mla and fp8_scaled byte layouts checked byte by byte against an image
// built independently here (quantized through the quant_fp8 op, placed by the §4.1 / §4.3 rules), for
// the ref backend and every cpu backend; loads against the same independent values; f32 rows; poisoned
// groups; validate() rejections.
#include <limits>

#include "dsv4_cache_util.h"
#include "ops/kv_record.h"

namespace sieve::test {
namespace {

TEST(KvRecordLayout, ByteCounts) {
    // §4.1: 448 fp8 + 64·2 bf16 + 7 scales + 1 pad = 584; data part 576.
    const KvRecordLayout release{KvRecordFormat::fp8_ds_mla, 512, 64};
    EXPECT_EQ(release.data_bytes(), 576);
    EXPECT_EQ(release.scale_bytes(), 8);
    EXPECT_EQ(release.entry_bytes(), 584);
    // Test model: nope 24 in one partial tile, scales padded to 8.
    const KvRecordLayout small{KvRecordFormat::fp8_ds_mla, 32, 8};
    EXPECT_EQ(small.n_tiles(), 1);
    EXPECT_EQ(small.entry_bytes(), 24 + 16 + 8);
    // §4.3: 128 fp8 + one fp32 scale = 132.
    EXPECT_EQ((KvRecordLayout{KvRecordFormat::fp8_scaled, 128, 0}.entry_bytes()), 132);
    EXPECT_EQ((KvRecordLayout{KvRecordFormat::f32, 512, 64}.entry_bytes()), 2048);
    // 9 tiles need 16 scale bytes.
    EXPECT_EQ((KvRecordLayout{KvRecordFormat::fp8_ds_mla, 600, 24}.scale_bytes()), 16);
}

// Quantizes one group of (bf16-rounded) values with the quant_fp8 op of the ref backend: q bytes,
// the ue8m0 byte and the fp32 scale.
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

struct StoreCase {
    KvRecordLayout layout;
    int64_t block_size, n_blocks, n_rows;
    DType x_type;
};

// Rows of varied magnitudes (including e4m3-subnormal members, all-zero tiles and, optionally, a NaN).
std::vector<float> make_rows(Rng& rng, int64_t n_rows, int64_t dim, bool with_nan) {
    std::vector<float> x(static_cast<size_t>(n_rows * dim));
    for (int64_t r = 0; r < n_rows; ++r) {
        const float mag = std::ldexp(1.0f, static_cast<int>(rng.integer(-12, 12)));
        for (int64_t i = 0; i < dim; ++i) {
            float v = rng.normal(mag);
            if (rng.coin(0.05)) v *= 1e-4f;
            if (r % 5 == 3 && i < 64) v = 0.0f;
            x[static_cast<size_t>(r * dim + i)] = v;
        }
    }
    if (with_nan && n_rows > 1) x[static_cast<size_t>(dim + 1)] = std::numeric_limits<float>::quiet_NaN();
    return x;
}

// The expected cache image after storing x at slots, built from the layout rules of ops/kv_record.h.
std::vector<uint8_t> expected_image(Backend& ref, const StoreCase& c, const TestCache& cache, const std::vector<float>& x,
                                    const std::vector<int32_t>& slots) {
    std::vector<uint8_t> img(cache.buf.bytes(), kPoison);
    const KvRecordLayout& l = c.layout;
    for (int64_t r = 0; r < c.n_rows; ++r) {
        const int32_t s = slots[static_cast<size_t>(r)];
        if (s < 0) continue;
        const int64_t block = s / c.block_size, j = s % c.block_size;
        uint8_t* b = img.data() + block * cache.block_bytes;
        std::vector<float> v(static_cast<size_t>(l.dim));
        for (int64_t i = 0; i < l.dim; ++i) v[static_cast<size_t>(i)] = round_to_bf16(x[static_cast<size_t>(r * l.dim + i)]);
        if (l.format == KvRecordFormat::f32) {
            std::memcpy(b + j * l.dim * 4, x.data() + r * l.dim, static_cast<size_t>(l.dim) * 4);
            continue;
        }
        if (l.format == KvRecordFormat::fp8_scaled) {
            const GroupQuant g = quant_group(ref, v);
            std::memcpy(b + j * l.dim, g.q.data(), g.q.size());
            std::memcpy(b + c.block_size * l.dim + j * 4, &g.s, 4);  // [bs·dim data][bs·4 scales]
            continue;
        }
        // fp8_ds_mla: token data at j·(nope + 2·rope), scales at bs·data_bytes + j·scale_bytes.
        const int64_t nope = l.dim - l.rope_dim, data_bytes = nope + 2 * l.rope_dim;
        const int64_t tiles = (nope + 63) / 64, scale_bytes = (tiles + 7) / 8 * 8;
        uint8_t* data = b + j * data_bytes;
        uint8_t* scales = b + c.block_size * data_bytes + j * scale_bytes;
        for (int64_t g = 0; g < tiles; ++g) {
            const int64_t g0 = g * 64, n = std::min<int64_t>(64, nope - g0);
            const GroupQuant q = quant_group(ref, std::vector<float>(v.begin() + g0, v.begin() + g0 + n));
            std::memcpy(data + g0, q.q.data(), static_cast<size_t>(n));
            scales[g] = q.e;
        }
        for (int64_t g = tiles; g < scale_bytes; ++g) scales[g] = 0;
        for (int64_t i = 0; i < l.rope_dim; ++i) {
            const uint16_t h = f32_to_bf16(v[static_cast<size_t>(nope + i)]);
            data[nope + 2 * i] = static_cast<uint8_t>(h & 0xff);
            data[nope + 2 * i + 1] = static_cast<uint8_t>(h >> 8);
        }
    }
    return img;
}

TEST(KvRecordConformance, StoreWritesTheSpecifiedBytesOnEveryBackend) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4101);
    const std::vector<StoreCase> cases = {
        {{KvRecordFormat::fp8_ds_mla, 512, 64}, 3, 4, 9, DType::f32},    // release record, partial last block
        {{KvRecordFormat::fp8_ds_mla, 512, 64}, 64, 1, 5, DType::bf16},  // vLLM's block of 64
        {{KvRecordFormat::fp8_ds_mla, 32, 8}, 4, 3, 10, DType::f32},     // the test model: one partial tile
        {{KvRecordFormat::fp8_ds_mla, 200, 8}, 2, 5, 7, DType::f32},     // 3 tiles, the last partial
        {{KvRecordFormat::fp8_ds_mla, 64, 64}, 3, 2, 4, DType::f32},     // no nope dims at all
        {{KvRecordFormat::fp8_scaled, 128, 0}, 5, 3, 12, DType::f32},    // §4.3 indexer key
        {{KvRecordFormat::fp8_scaled, 16, 0}, 3, 3, 6, DType::bf16},
        {{KvRecordFormat::f32, 32, 8}, 3, 3, 7, DType::f32},
        {{KvRecordFormat::f32, 24, 0}, 2, 4, 5, DType::bf16},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const StoreCase& c = cases[ci];
        SCOPED_TRACE(fmt::format("case {}: {} dim {} rope {} bs {} x {}", ci, kv_record_format_name(c.layout.format),
                                 c.layout.dim, c.layout.rope_dim, c.block_size, dtype_name(c.x_type)));
        TestCache want_cache(c.layout.entry_bytes(), c.block_size, c.n_blocks);
        std::vector<float> x = make_rows(rng, c.n_rows, c.layout.dim, ci % 3 == 0);
        if (c.x_type == DType::bf16)
            for (float& v : x) v = round_to_bf16(v);
        std::vector<uint16_t> xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
        std::vector<int32_t> slots = random_slots(rng, c.n_rows, want_cache.capacity());
        slots[1] = -1;  // skipped
        const std::vector<uint8_t> img = expected_image(*ref, c, want_cache, x, slots);

        auto run = [&](Backend& b, TestCache& cache) {
            KvStoreParams p;
            p.x = c.x_type == DType::bf16 ? static_cast<const void*>(xb.data()) : x.data();
            p.x_type = c.x_type;
            p.slots = slots.data();
            p.cache = cache.view();
            p.layout = c.layout;
            p.n_rows = c.n_rows;
            p.x_row_stride = c.layout.dim;
            return b.kv_store(p);
        };
        ASSERT_TRUE(run(*ref, want_cache).is_ok());
        EXPECT_TRUE(bytes_equal(img.data(), want_cache.buf.data(), img.size(), "ref record bytes"));
        EXPECT_TRUE(want_cache.buf.guards_intact("ref cache"));
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            TestCache got(c.layout.entry_bytes(), c.block_size, c.n_blocks);
            const Status st = run(*nb.backend, got);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(bytes_equal(img.data(), got.buf.data(), img.size(), "record bytes"));
            EXPECT_TRUE(got.buf.guards_intact("cache"));
        }

        // Loads: every backend returns the same values, equal to the independent dequantization.
        std::vector<int32_t> load_slots = slots;
        load_slots.push_back(-1);  // a row of zeros
        const int64_t n_load = static_cast<int64_t>(load_slots.size());
        std::vector<double> want(static_cast<size_t>(n_load * c.layout.dim), 0.0);
        for (int64_t r = 0; r < c.n_rows; ++r) {
            if (load_slots[static_cast<size_t>(r)] < 0) continue;
            const float* xr = x.data() + r * c.layout.dim;
            const int64_t nope = c.layout.format == KvRecordFormat::fp8_ds_mla ? c.layout.dim - c.layout.rope_dim
                                 : c.layout.format == KvRecordFormat::fp8_scaled ? c.layout.dim
                                                                                  : 0;
            const int64_t group = c.layout.format == KvRecordFormat::fp8_ds_mla ? 64 : std::max<int64_t>(nope, 1);
            for (int64_t g0 = 0; g0 < nope; g0 += group) {
                std::vector<float> v;
                for (int64_t i = g0; i < std::min(nope, g0 + group); ++i) v.push_back(round_to_bf16(xr[i]));
                const GroupQuant q = quant_group(*ref, v);
                for (size_t i = 0; i < v.size(); ++i)
                    want[static_cast<size_t>(r * c.layout.dim + g0) + i] = fp8_e4m3_to_f32(q.q[i]) * q.s;
            }
            for (int64_t i = nope; i < c.layout.dim; ++i)
                want[static_cast<size_t>(r * c.layout.dim + i)] =
                    c.layout.format == KvRecordFormat::f32 ? xr[i] : round_to_bf16(xr[i]);
        }
        const std::vector<double> zero_tol(want.size(), 0.0);
        for (DType yt : {DType::f32, DType::bf16}) {
            std::vector<double> want_y = want;
            if (yt == DType::bf16)
                for (double& v : want_y) v = round_to_bf16(static_cast<float>(v));
            auto load_with = [&](Backend& b, const TestCache& cache) -> std::vector<double> {
                GuardedBuffer y(static_cast<size_t>(n_load * c.layout.dim) * dtype_size(yt));
                KvLoadParams p;
                p.cache = const_cast<TestCache&>(cache).view();
                p.layout = c.layout;
                p.slots = load_slots.data();
                p.y = y.data();
                p.y_type = yt;
                p.n_rows = n_load;
                p.y_row_stride = c.layout.dim;
                const Status st = b.kv_load(p);
                EXPECT_TRUE(st.is_ok()) << st.to_string();
                EXPECT_TRUE(y.guards_intact("load y"));
                std::vector<double> out(static_cast<size_t>(n_load * c.layout.dim));
                for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_f32(y.data(), yt, static_cast<int64_t>(i));
                return out;
            };
            EXPECT_TRUE(all_close(want_y, load_with(*ref, want_cache), zero_tol, "ref kv_load"));
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                EXPECT_TRUE(all_close(want_y, load_with(*nb.backend, want_cache), zero_tol, "kv_load"));
            }
        }
    }
}

TEST(KvRecordKnownValues, OnesAndPoison) {
    // A row whose nope dims are all 1.0: amax 1 → s = 2^ceil(log2(1/448)) = 2^-8 (ue8m0 byte 119 = 0x77),
    // 1/s = 256 = 2^8 → e4m3 exponent field 8 + 7 = 15, mantissa 0 → 0x78. Rope dim 0.5 → bf16 0x3f00.
    auto ref = ref_backend();
    const KvRecordLayout l{KvRecordFormat::fp8_ds_mla, 72, 8};  // 64 nope + 8 rope
    std::vector<float> x(72, 1.0f);
    for (int i = 64; i < 72; ++i) x[static_cast<size_t>(i)] = 0.5f;
    std::vector<Backend*> all = {ref.get()};
    auto backends = host_backends_under_test();
    for (auto& nb : backends) all.push_back(nb.backend.get());
    for (Backend* b : all) {
        SCOPED_TRACE(b->name());
        TestCache cache(l.entry_bytes(), 2, 1);
        const int32_t slot = 1;
        KvStoreParams p;
        p.x = x.data();
        p.slots = &slot;
        p.cache = cache.view();
        p.layout = l;
        p.n_rows = 1;
        ASSERT_TRUE(b->kv_store(p).is_ok());
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
        x[3] = -std::numeric_limits<float>::quiet_NaN();
        ASSERT_TRUE(b->kv_store(p).is_ok());
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
        x[3] = 1.0f;
    }
}

TEST(KvRecordValidate, RejectsBadGeometry) {
    const KvRecordLayout l{KvRecordFormat::fp8_ds_mla, 512, 64};
    TestCache cache(l.entry_bytes(), 4, 1);
    float x[512] = {};
    int32_t slot = 0;
    KvStoreParams p;
    p.x = x;
    p.slots = &slot;
    p.cache = cache.view();
    p.layout = l;
    p.n_rows = 1;
    EXPECT_TRUE(validate(p).is_ok());
    KvStoreParams q = p;
    q.cache.entry_bytes = 576;
    EXPECT_NE(validate(q).message().find("entry_bytes = 576"), std::string::npos) << validate(q).message();
    q = p;
    q.layout.rope_dim = 63;
    EXPECT_EQ(validate(q).code(), StatusCode::invalid_argument);
    q = p;
    slot = -2;
    EXPECT_TRUE(validate(q).is_ok());
    EXPECT_NE(check_indices(q).message().find("slots[0] = -2"), std::string::npos) << check_indices(q).message();
    KvLoadParams lp;
    float y[512];
    lp.cache = p.cache;
    lp.layout = l;
    lp.slots = &slot;
    lp.y = y;
    lp.n_rows = 1;
    EXPECT_TRUE(validate(lp).is_ok());
    EXPECT_NE(check_indices(lp).message().find("kv_load: slots[0] = -2"), std::string::npos) << check_indices(lp).message();
    slot = 0;
    q = p;
    q.cache.block_bytes = 100;
    EXPECT_EQ(validate(q).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace sieve::test

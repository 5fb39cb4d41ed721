// Kernel bodies of DeepSeek-V4's hot ops (dsv4_kernels.h), written once over simd.h and compiled
// once per ISA by dsv4_kernels_<isa>.cpp, which defines SIEVE_CPU_DSV4_TABLE before including this
// file. Everything is in an anonymous namespace (simd.h, "ODR safety"). Semantics: ops/sparse_mqa.h,
// ops/indexer_scores.h, ops/kv_record.h (record decoding bit-identical to ref).
#include "backends/cpu/dsv4_kernels.h"
#include "backends/cpu/simd.h"

#ifndef SIEVE_CPU_DSV4_TABLE
#error "define SIEVE_CPU_DSV4_TABLE before including dsv4_kernels_impl.inl"
#endif

namespace sieve::cpu {
namespace {

// ---- record decoding (ops/kv_record.h "Load semantics"; core/dtype.h values) ----------------------

// 2^(e − 127); 0xFF is NaN, 0 the fp32 subnormal 2^-127 (core ue8m0_to_f32).
inline float d4_ue8m0_value(uint8_t e) {
    if (e == 0xff) return float_of(0x7fc00000u);
    if (e == 0) return float_of(0x00400000u);
    return float_of(static_cast<uint32_t>(e) << 23);
}
// The e4m3 value of a byte (core fp8_e4m3_to_f32), exact.
inline float d4_e4m3_value(uint8_t b) {
    if ((b & 0x7f) == 0x7f) return float_of((b & 0x80) ? 0xffc00000u : 0x7fc00000u);
    return s_e4m3_scaled(b) * 0x1p120f;
}

// dst[i] = e4m3(src[i]) · s for i < n: vector lanes decode the byte into fp32 bits (value · 2^-120, exact,
// see simd.h), restore 2^120 (exact) and apply the scale (one rounding: ref's `fp8_e4m3_to_f32(b) * s`).
inline void d4_decode_e4m3(const uint8_t* src, float s, float* dst, int64_t n) {
    const VF two120 = vf_set1(0x1p120f), vs = vf_set1(s);
    const VI field_mask = vi_set1(static_cast<int32_t>(0x87f00000u)), low7 = vi_set1(0x7f);
    const VI qnan = vi_set1(0x7fc00000), sign = vi_set1(static_cast<int32_t>(0x80000000u));
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const VI b = vi_load_i8(src + i);  // sign-extended: bit 7 lands in bit 31 after the shift
        const VI bits = vi_and(vi_shl<20>(b), field_mask);
        const VF v = vf_mul(vf_mul(vf_from_bits(bits), two120), vs);
        const uint32_t nan = vi_eq_mask(vi_and(b, low7), low7);  // 0x7F / 0xFF: NaN codes
        vf_store(dst + i, vf_from_bits(vi_select(nan, vi_or(qnan, vi_and(b, sign)), vi_bits(v))));
    }
    for (; i < n; ++i) dst[i] = d4_e4m3_value(src[i]) * s;
}

// The fp32 row of `slot`: a pointer into the cache for f32 rows, else decoded into dst [dim].
inline const float* d4_record_row(const RecordCache& c, int32_t slot, float* dst) {
    const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
    const int64_t j = slot % c.block_size;
    const uint8_t* data = block + j * c.data_bytes;
    if (c.format == 0) return reinterpret_cast<const float*>(data);
    if (c.format == 1) {  // fp8_ds_mla: e4m3 · 2^(e_tile − 127), then the bf16 rope tail
        const uint8_t* scales = block + c.scales_offset + j * c.scale_bytes;
        for (int64_t g = 0; g * 64 < c.nope; ++g)
            d4_decode_e4m3(data + g * 64, d4_ue8m0_value(scales[g]), dst + g * 64, s_min(int64_t{64}, c.nope - g * 64));
        const uint16_t* rope = reinterpret_cast<const uint16_t*>(data + c.nope);  // 2-byte aligned: nope is even
        int64_t i = c.nope;
        for (; i + kLanes <= c.dim; i += kLanes) vf_store(dst + i, vf_load_bf16(rope + (i - c.nope)));
        for (; i < c.dim; ++i) dst[i] = s_bf16_to_f32(rope[i - c.nope]);
        return dst;
    }
    float s;  // fp8_scaled: one fp32 scale
    __builtin_memcpy(&s, block + c.scales_offset + j * 4, 4);
    d4_decode_e4m3(data, s, dst, c.dim);
    return dst;
}

// ---- vector helpers -----------------------------------------------------------------------------

inline float d4_dot(const float* a, const float* b, int64_t n) {
    VF a0 = vf_zero(), a1 = vf_zero(), a2 = vf_zero(), a3 = vf_zero();
    int64_t i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
        a0 = vf_fma(vf_load(a + i), vf_load(b + i), a0);
        a1 = vf_fma(vf_load(a + i + kLanes), vf_load(b + i + kLanes), a1);
        a2 = vf_fma(vf_load(a + i + 2 * kLanes), vf_load(b + i + 2 * kLanes), a2);
        a3 = vf_fma(vf_load(a + i + 3 * kLanes), vf_load(b + i + 3 * kLanes), a3);
    }
    for (; i + kLanes <= n; i += kLanes) a0 = vf_fma(vf_load(a + i), vf_load(b + i), a0);
    float sum = vf_sum(vf_add(vf_add(a0, a1), vf_add(a2, a3)));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// acc[i] += w · x[i]
inline void d4_axpy(float* acc, const float* x, float w, int64_t n) {
    const VF vw = vf_set1(w);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vf_store(acc + i, vf_fma(vw, vf_load(x + i), vf_load(acc + i)));
    for (; i < n; ++i) acc[i] += w * x[i];
}

// dst[i] = widen(src[i]) for a f32 or bf16 row.
inline void d4_widen(const void* src, bool bf16, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vf_store(dst + i, vf_load_row(src, bf16, i));
    for (; i < n; ++i) dst[i] = s_load(src, bf16, i);
}

// ---- sparse MQA with sink (ops/sparse_mqa.h) --------------------------------------------------------

void sparse_mqa_block(const SparseMqaKernelArgs& a, int64_t t, int64_t h0, int64_t h1, void* ws) {
    char* w = static_cast<char*>(ws);
    const float** rows = reinterpret_cast<const float**>(w);
    float* buf = reinterpret_cast<float*>(w + a.ws_rows);
    float* logits = reinterpret_cast<float*>(w + a.ws_logits);
    float* qf = reinterpret_cast<float*>(w + a.ws_q);
    float* acc = reinterpret_cast<float*>(w + a.ws_acc);
    const int64_t d = a.head_dim;

    // Each listed row is dequantized once for all heads of the token (window first, then compressed).
    int64_t n = 0;
    for (int64_t j = 0; j < a.n_window; ++j) {
        const int32_t slot = a.window_slots[t * a.window_stride + j];
        if (slot < 0) continue;
        rows[n] = d4_record_row(a.window, slot, buf + n * d);
        ++n;
    }
    for (int64_t j = 0; j < a.n_compressed; ++j) {
        const int32_t slot = a.compressed_slots[t * a.compressed_stride + j];
        if (slot < 0) continue;
        rows[n] = d4_record_row(a.compressed, slot, buf + n * d);
        ++n;
    }

    const int64_t q_elem = a.q_bf16 ? 2 : 4, o_elem = a.out_bf16 ? 2 : 4;
    for (int64_t h = h0; h < h1; ++h) {
        char* out = static_cast<char*>(a.out) + (t * a.out_token_stride + h * a.out_head_stride) * o_elem;
        if (n == 0) {  // no valid row: o = 0 (§3.8)
            for (int64_t i = 0; i < d; ++i) s_store(out, a.out_bf16, i, 0.0f);
            continue;
        }
        d4_widen(static_cast<const char*>(a.q) + (t * a.q_token_stride + h * a.q_head_stride) * q_elem, a.q_bf16, qf, d);
        float m = a.sink ? a.sink[h] : -__builtin_inff();
        for (int64_t j = 0; j < n; ++j) {
            const float l = a.scale * d4_dot(qf, rows[j], d);
            logits[j] = l;
            m = s_fmax(m, l);
        }
        float den = a.sink ? __builtin_expf(a.sink[h] - m) : 0.0f;
        for (int64_t i = 0; i < d; ++i) acc[i] = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
            const float p = __builtin_expf(logits[j] - m);
            den += p;
            d4_axpy(acc, rows[j], p, d);
        }
        const float inv = 1.0f / den;
        const VF vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= d; i += kLanes) vf_store_row(out, a.out_bf16, i, vf_mul(vf_load(acc + i), vinv));
        for (; i < d; ++i) s_store(out, a.out_bf16, i, acc[i] * inv);
    }
}

// ---- indexer scores (ops/indexer_scores.h) ----------------------------------------------------------

void indexer_scores_rows(const IndexerScoresKernelArgs& a, int64_t t0, int64_t t1, void* ws) {
    float* qf = static_cast<float*>(ws);
    float* key = reinterpret_cast<float*>(static_cast<char*>(ws) + a.ws_key);
    const int64_t d = a.head_dim, H = a.n_heads, q_elem = a.q_bf16 ? 2 : 4;
    for (int64_t t = t0; t < t1; ++t) {
        for (int64_t h = 0; h < H; ++h)
            d4_widen(static_cast<const char*>(a.q) + (t * a.q_token_stride + h * a.q_head_stride) * q_elem, a.q_bf16,
                     qf + h * d, d);
        const float* w = a.weights + t * a.weights_row_stride;
        const int32_t* slots = a.key_slots + static_cast<int64_t>(a.token_list[t]) * a.key_slots_stride;
        float* scores = a.scores + t * a.scores_row_stride;
        for (int64_t j = 0; j < a.n_keys[t]; ++j) {
            if (slots[j] < 0) {
                scores[j] = -__builtin_inff();
                continue;
            }
            const float* k = d4_record_row(a.keys, slots[j], key);
            float s = 0.0f;
            for (int64_t h = 0; h < H; ++h) {
                const float dot = d4_dot(qf + h * d, k, d);
                if (dot > 0.0f) s += w[h] * dot;  // Σ_h w_h · ReLU(<q_h, K_j>) (§3.6)
            }
            scores[j] = s;
        }
    }
}

}  // namespace

extern const CpuDsv4Kernels SIEVE_CPU_DSV4_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
    .sparse_mqa_block = sparse_mqa_block,
    .indexer_scores_rows = indexer_scores_rows,
};

}  // namespace sieve::cpu

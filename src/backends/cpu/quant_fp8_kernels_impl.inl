// Kernel bodies of FP8 e4m3 quantization of rows and groups (ops/quant_fp8.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

// e4m3 codes of finite values already clamped to ±448 (bit-identical to core f32_to_fp8_e4m3).
inline VI vi_e4m3_encode(VF v) {
    const VI bits = vi_bits(v);
    const VI a = vi_and(bits, vi_set1(0x7fffffff));
    const VI sign = vi_and(vi_shr<24>(bits), vi_set1(0x80));
    const VI sub = vi_cvt_rne(vf_mul(vf_from_bits(a), vf_set1(512.0f)));  // |v| < 2^-6: RNE(|v|·2^9)
    const VI r = vi_add(a, vi_add(vi_set1(0x7ffff), vi_and(vi_shr<20>(a), vi_set1(1))));
    const VI normal = vi_sub(vi_shr<20>(r), vi_set1(120 << 3));  // 3 mantissa bits, RNE; rebias 127 → 7
    const uint32_t is_sub = vi_lt_mask(a, vi_set1(0x3c800000));
    return vi_or(vi_select(is_sub, sub, normal), sign);
}

// Element i (lanes i.. i + kLanes) of the values a group quantizes: x widened, and an f32 x rounded to bf16
// first when RB (ops/cache_store.h round_bf16).
template <bool XB, bool RB>
inline VF vf_load_quant(const void* x, int64_t i) {
    const VF v = vf_load_row(x, XB, i);
    if constexpr (RB && !XB) return vf_round_bf16(v);
    return v;
}
template <bool XB, bool RB>
inline float s_load_quant(const void* x, int64_t i) {
    const float v = s_load(x, XB, i);
    if constexpr (RB && !XB) return s_bf16_to_f32(s_f32_to_bf16(v));
    return v;
}

// The FP8 group quantizer of this backend (ops/quant_fp8.h rule, bit-identical to ref): values
// [g0, g0 + n) of x → e4m3 codes q[g0 + j], the ue8m0 byte *sb, the scale *sf and the dequantized values
// dq[g0 + j] (each output optional). Used by quant_fp8_rows and, through quant_fp8_group, by cache_store.
template <bool XB, bool DB, bool RB>
void quant_group(const void* x, int64_t n, uint8_t* q, uint8_t* sb, float* sf, void* dq, int64_t g0) {
    // amax through the integer order of |x| bits: finite ones compare like the floats, and any NaN or
    // infinity shows up as ≥ 0x7F800000.
    VI vmax = vi_set1(0);
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        vmax = vi_max(vmax, vi_and(vi_bits(vf_load_quant<XB, RB>(x, g0 + j)), vi_set1(0x7fffffff)));
    uint32_t amax_bits = static_cast<uint32_t>(vi_hmax(vmax));
    for (; j < n; ++j) {
        const uint32_t b = bits_of(s_load_quant<XB, RB>(x, g0 + j)) & 0x7fffffffu;
        if (b > amax_bits) amax_bits = b;
    }
    if (amax_bits >= 0x7f800000u) {  // NaN or infinity in the group: poisoned (ops/quant_fp8.h)
        const float nan = float_of(0x7fc00000u);
        if (sb) *sb = 0xff;
        if (sf) *sf = nan;
        for (j = 0; j < n; ++j) {
            const uint32_t b = bits_of(s_load_quant<XB, RB>(x, g0 + j));
            if (q) q[g0 + j] = static_cast<uint8_t>(0x7fu | ((b >> 24) & 0x80u));
            if (dq) s_store(dq, DB, g0 + j, nan);
        }
        return;
    }
    const float s = ue8m0_scale_for_amax(float_of(amax_bits));  // core: the reference's rounding of the scale
    const float inv_s = 1.0f / s;                               // exact: s is a power of two in [2^-22, 2^120]
    if (sb) *sb = static_cast<uint8_t>(bits_of(s) >> 23);       // the biased exponent of a normal power of two
    if (sf) *sf = s;
    const VF vinv = vf_set1(inv_s), vs = vf_set1(s), hi = vf_set1(448.0f), lo = vf_set1(-448.0f);
    for (j = 0; j + kLanes <= n; j += kLanes) {
        const VF v = vf_max(vf_min(vf_mul(vf_load_quant<XB, RB>(x, g0 + j), vinv), hi), lo);
        const VI code = vi_e4m3_encode(v);
        if (q) vi_store_u8(q + g0 + j, code);
        if (dq) vf_store_row(dq, DB, g0 + j, vf_mul(vf_e4m3_decode(vi_sar<24>(vi_shl<24>(code))), vs));  // exact
    }
    for (; j < n; ++j) {
        const float v = s_fmax(s_fmin(s_load_quant<XB, RB>(x, g0 + j) * inv_s, 448.0f), -448.0f);
        const uint8_t code = s_f32_to_e4m3_clamped(v);
        if (q) q[g0 + j] = code;
        if (dq) s_store(dq, DB, g0 + j, s_e4m3_decode(code) * s);
    }
}

template <bool XB, bool DB>
void quant_fp8_rows_t(const QuantFp8Params& p, int64_t r0, int64_t r1) {
    const int64_t n_groups = p.dim / p.group_size;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / p.n_heads, h = r % p.n_heads;
        const char* x = static_cast<const char*>(p.x) + (t * p.x_token_stride + h * p.x_head_stride) * (XB ? 2 : 4);
        uint8_t* q = p.q ? p.q + t * p.q_token_stride + h * p.q_head_stride : nullptr;
        const int64_t so = t * p.scale_token_stride + h * p.scale_head_stride;
        char* dq = p.dequant ? static_cast<char*>(p.dequant) +
                                   (t * p.dequant_token_stride + h * p.dequant_head_stride) * (DB ? 2 : 4)
                             : nullptr;
        for (int64_t g = 0; g < n_groups; ++g)
            quant_group<XB, DB, false>(x, p.group_size, q, p.scale_ue8m0 ? p.scale_ue8m0 + so + g : nullptr,
                                       p.scale_f32 ? p.scale_f32 + so + g : nullptr, dq, g * p.group_size);
    }
}

void quant_fp8_rows(const QuantFp8Params& p, int64_t r0, int64_t r1) {
    const bool xb = p.x_type == DType::bf16, db = p.dequant_type == DType::bf16;
    if (xb && db) return quant_fp8_rows_t<true, true>(p, r0, r1);
    if (xb) return quant_fp8_rows_t<true, false>(p, r0, r1);
    if (db) return quant_fp8_rows_t<false, true>(p, r0, r1);
    return quant_fp8_rows_t<false, false>(p, r0, r1);
}

float quant_fp8_group(const void* x, bool x_bf16, bool round_bf16, int64_t n, uint8_t* q) {
    float s = 0.0f;
    if (x_bf16)
        quant_group<true, false, false>(x, n, q, nullptr, &s, nullptr, 0);
    else if (round_bf16)
        quant_group<false, false, true>(x, n, q, nullptr, &s, nullptr, 0);
    else
        quant_group<false, false, false>(x, n, q, nullptr, &s, nullptr, 0);
    return s;
}

// A minimal vector layer for the cpu kernels, one implementation per ISA, chosen by the flags of
// the translation unit that includes it (kernels_<isa>.cpp): AVX-512 (16 lanes), AVX2 (8 lanes) or
// portable scalar code (1 lane).
//
// ODR safety. Every per-ISA translation unit is compiled with different -m flags, so nothing they
// define may be shared with another unit under the same name: the linker would keep one copy, maybe
// an AVX-512 one called from the scalar path. Hence everything here lives in an anonymous namespace
// (internal linkage), and kernel sources call no inline function of other headers (no std::
// templates, no core/dtype.h helpers; the CMake check in src/backends/CMakeLists.txt enforces it).
// Intrinsics are always_inline and never emitted out of line.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12's AVX-512 headers trip -Wuninitialized in their own _mm512_undefined_* helpers once inlined
// (GCC bug 105593); the warnings point into the header, so silencing them for its lines is enough.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#ifndef SIEVE_CPU_ISA_NS
#error "define SIEVE_CPU_ISA_NS (the ISA of the unit: scalar, avx2, avx512, avx512_bf16, amx_bf16) before including simd.h"
#endif

// In namespace sieve::cpu::<isa> like the kernels built on it, so that a profile names the ISA of every
// function that was not inlined.
namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// ---- scalar helpers, bit-identical to core/dtype.h (checked by the conformance tests) ------------

inline uint32_t bits_of(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return u;
}
inline float float_of(uint32_t u) {
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
inline float s_bf16_to_f32(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }
// Round to nearest even; NaN stays a quiet NaN with its sign (core f32_to_bf16).
inline uint16_t s_f32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}
inline int64_t s_min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t s_max(int64_t a, int64_t b) { return a > b ? a : b; }
// The rule of MAXPS / MINPS (vf_max, vf_min): b when either operand is NaN.
inline float s_fmax(float a, float b) { return a > b ? a : b; }
inline float s_fmin(float a, float b) { return a < b ? a : b; }

// Loads element i of a f32 or bf16 row as fp32; stores with RNE to bf16.
inline float s_load(const void* base, bool bf16, int64_t i) {
    return bf16 ? s_bf16_to_f32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}
inline void s_store(void* base, bool bf16, int64_t i, float v) {
    if (bf16)
        static_cast<uint16_t*>(base)[i] = s_f32_to_bf16(v);
    else
        static_cast<float*>(base)[i] = v;
}

// e4m3 code of a finite |v| ≤ 448 (core f32_to_fp8_e4m3 after the caller's clamp): RNE, subnormals kept.
inline uint8_t s_f32_to_e4m3_clamped(float v) {
    const uint32_t u = bits_of(v);
    const uint32_t sign = (u >> 24) & 0x80u;
    const uint32_t a = u & 0x7fffffffu;
    uint32_t code;
    if (a < 0x3c800000u) {  // |v| < 2^-6: subnormal e4m3, q = RNE(|v| · 2^9)
        code = static_cast<uint32_t>(__builtin_nearbyintf(float_of(a) * 512.0f));
    } else {  // round the mantissa to 3 bits (carry may bump the exponent), rebias 127 → 7
        const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
        code = (r >> 20) - (120u << 3);
    }
    return static_cast<uint8_t>(code | sign);
}
// e4m3 byte → its exact fp32 value, always a normal fp32 (or zero): the byte's exponent and mantissa
// are placed in the fp32 fields and the exponent rebased by 127 − 7 = 120; a subnormal code (exponent
// field 0, value m·2^-9) comes out of that as 2^-7·(1 + m/8) and is mapped to 2·that − 2^-6 = m·2^-9.
// (Producing fp32 subnormals instead, e.g. by decoding to value·2^-120, stalls on denormal operands.)
// Not for NaN bytes (0x7F/0xFF): callers rule those out first.
inline float s_e4m3_decode(uint8_t b) {
    const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(b))) << 20;
    const uint32_t mag = u & 0x07f00000u;
    float a = float_of(mag + (120u << 23));
    if (mag < 0x00800000u) a = a * 2.0f - 0x1p-6f;  // exact: both steps are
    return float_of(bits_of(a) | (u & 0x80000000u));
}
// e4m3 byte → its value · 2^-120, exactly (a normal e4m3 gives a normal fp32, a subnormal one a
// subnormal fp32): multiply by 2^120, or fold that into a scale. Prefer s_e4m3_decode, which never
// produces fp32 subnormals. Not for NaN bytes.
inline float s_e4m3_scaled(uint8_t b) {
    return float_of((static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(b))) << 20) & 0x87f00000u);
}
// vf_load_e4m3 (AVX2): each e4m3 code becomes the binary16 of its value · 2^-8, exactly: the
// sign to bit 15, the 4 exponent and 3 mantissa bits under binary16's 5 and 10 (its exponent bias 15 = 7 + 8),
// so that a normal code gives a normal binary16 and a subnormal one (m·2^-9) a subnormal one (m·2^-17); from
// the code sign-extended to 16 bits that is (code << 7) & 0xBF80, the sign's copy in bit 14 cleared. F16C's
// conversion to fp32 is exact (a binary16 subnormal widens to a normal fp32), and · 2^8 gives the value: five
// instructions a vector where vf_e4m3_decode of vi_load_i8 takes ten. Not for NaN bytes.

// ---- software prefetch ------------------------------------------------------------------------

// The line holding p into L1 (prefetcht0) or into L2 only (prefetcht1). Statements the compiler must
// keep: GCC 12 judged helpers made of __builtin_prefetch loops free of side effects and deleted their
// calls, so QSA's bf16 key scoring and the V4 indexer and attention row gathers ran with no prefetch at
// all although their sources asked for one. A prefetch never faults: p may lie past the data.
#if defined(__x86_64__) || defined(__i386__)
inline void prefetch_l1(const void* p) { __asm__ volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }
inline void prefetch_l2(const void* p) { __asm__ volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p))); }
#else
inline void prefetch_l1(const void* p) { __builtin_prefetch(p, 0, 3); }
inline void prefetch_l2(const void* p) { __builtin_prefetch(p, 0, 2); }
#endif

// ---- AMX tiles (amx_bf16 level) -------------------------------------------------------------------

#if defined(__AMX_TILE__)
// Palette 1 with tiles 0–7 of 16 rows × 64 bytes: every tile the kernels use (16 × 32 bf16, 16 × 16 fp32).
struct alignas(64) AmxTileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// The calling thread's tile registers: configured for one kernel call, released after it (a released
// thread's context switches skip the 8 KiB of tile state). Linux grants the process the registers when
// core/cpu_features.cpp detects the amx_bf16 level.
inline void amx_tiles_begin() {
    const AmxTileConfig config;
    _tile_loadconfig(&config);
}
inline void amx_tiles_end() { _tile_release(); }
#endif

// ---- bf16 dot products against one broadcast pair (avx512_bf16 level) ----------------------------

#if defined(__AVX512BF16__)
// acc + the dot products of x's bf16 pairs with the pair at p (4 bytes, read into every lane by the
// instruction's own {1to16} broadcast). GCC 12 does not fold a _mm512_set1_epi32 of memory into vdpbf16ps;
// its separate vpbroadcastd took a vector-port slot per dot product, and the attention's register tiles, one
// broadcast per dot product, ran 5–13 % slower (dev/bench_attention, AMD EPYC). Kernels that reuse one
// broadcast for several dot products (the indexer's) keep the register broadcast. The operand is read
// through a may_alias type: p points into bf16 data that vector stores wrote.
typedef uint32_t __attribute__((may_alias)) DpPairWord;
inline __m512 dp_bf16_broadcast(__m512 acc, __m512bh x, const void* p) {
    __asm__("vdpbf16ps %[m]%{1to16%}, %[x], %[acc]" : [acc] "+v"(acc) : [x] "v"(x), [m] "m"(*static_cast<const DpPairWord*>(p)));
    return acc;
}
#endif

// ---- vectors ----------------------------------------------------------------------------------

#if defined(__AVX512F__)

inline constexpr int kLanes = 16;
struct VF {
    __m512 v;
};
struct VI {
    __m512i v;
};

inline VF vf_zero() { return {_mm512_setzero_ps()}; }
inline VF vf_set1(float a) { return {_mm512_set1_ps(a)}; }
inline VF vf_load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void vf_store(float* p, VF a) { _mm512_storeu_ps(p, a.v); }
inline VF vf_load_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
}
inline void vf_store_bf16(uint16_t* p, VF a) {
    const __m512i u = _mm512_castps_si512(a.v);
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));  // quiet NaN, sign kept
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
}
inline VF vf_add(VF a, VF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VF vf_sub(VF a, VF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VF vf_mul(VF a, VF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VF vf_fma(VF a, VF b, VF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }  // a·b + c, one rounding
inline VF vf_min(VF a, VF b) { return {_mm512_min_ps(a.v, b.v)}; }
inline VF vf_max(VF a, VF b) { return {_mm512_max_ps(a.v, b.v)}; }
inline float vf_sum(VF a) { return _mm512_reduce_add_ps(a.v); }
// Lanes (2i, 2i+1) swapped.
inline VF vf_swap_pairs(VF a) { return {_mm512_permute_ps(a.v, 0xb1)}; }
// One in-register Hadamard butterfly of span h < kLanes: lane j gets v[j] + v[j^h] when (j & h) == 0,
// else v[j^h] − v[j] — the (a + b, a − b) of ops/hadamard.h.
inline VF vf_butterfly(VF a, int h) {
    __m512 p;
    __mmask16 hi;
    switch (h) {
        case 1: p = _mm512_permute_ps(a.v, 0xb1); hi = 0xaaaa; break;
        case 2: p = _mm512_permute_ps(a.v, 0x4e); hi = 0xcccc; break;
        case 4: p = _mm512_shuffle_f32x4(a.v, a.v, 0xb1); hi = 0xf0f0; break;
        default: p = _mm512_shuffle_f32x4(a.v, a.v, 0x4e); hi = 0xff00; break;
    }
    return {_mm512_mask_sub_ps(_mm512_add_ps(a.v, p), hi, p, a.v)};
}

inline VI vi_load(const int32_t* p) { return {_mm512_loadu_si512(p)}; }
inline void vi_store(int32_t* p, VI a) { _mm512_storeu_si512(p, a.v); }
inline VI vi_set1(int32_t a) { return {_mm512_set1_epi32(a)}; }
inline VI vi_bits(VF a) { return {_mm512_castps_si512(a.v)}; }
inline VF vf_from_bits(VI a) { return {_mm512_castsi512_ps(a.v)}; }
inline VI vi_and(VI a, VI b) { return {_mm512_and_si512(a.v, b.v)}; }
inline VI vi_or(VI a, VI b) { return {_mm512_or_si512(a.v, b.v)}; }
inline VI vi_xor(VI a, VI b) { return {_mm512_xor_si512(a.v, b.v)}; }
inline VI vi_add(VI a, VI b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VI vi_sub(VI a, VI b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VI vi_max(VI a, VI b) { return {_mm512_max_epi32(a.v, b.v)}; }
template <int n> inline VI vi_shl(VI a) { return {_mm512_slli_epi32(a.v, n)}; }
template <int n> inline VI vi_shr(VI a) { return {_mm512_srli_epi32(a.v, n)}; }
template <int n> inline VI vi_sar(VI a) { return {_mm512_srai_epi32(a.v, n)}; }
inline int32_t vi_hmax(VI a) { return _mm512_reduce_max_epi32(a.v); }
// Lane-wise a < b (signed) as a bit mask, lane i → bit i.
inline uint32_t vi_lt_mask(VI a, VI b) { return _mm512_cmplt_epi32_mask(a.v, b.v); }
inline uint32_t vi_ge_mask(VI a, VI b) { return _mm512_cmpge_epi32_mask(a.v, b.v); }
inline uint32_t vi_eq_mask(VI a, VI b) { return _mm512_cmpeq_epi32_mask(a.v, b.v); }
inline VI vi_select(uint32_t mask, VI if_set, VI if_clear) {
    return {_mm512_mask_blend_epi32(static_cast<__mmask16>(mask), if_clear.v, if_set.v)};
}
// Round-to-nearest-even conversion (the default MXCSR mode).
inline VI vi_cvt_rne(VF a) { return {_mm512_cvtps_epi32(a.v)}; }
// kLanes bytes, sign-extended to int32.
inline VI vi_load_i8(const uint8_t* p) {
    return {_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
// The low byte of every lane, stored as kLanes bytes.
inline void vi_store_u8(uint8_t* p, VI a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(a.v)); }
// Packs the lanes selected by mask (lane order kept) to the front of out; returns how many.
inline int vi_compress_store(int32_t* out, uint32_t mask, VI a) {
    const __m512i packed = _mm512_maskz_compress_epi32(static_cast<__mmask16>(mask), a.v);
    _mm512_storeu_si512(out, packed);  // full-width store: out has kLanes slots of room
    return __builtin_popcount(mask);
}
inline VI vi_iota() { return {_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)}; }
// e4m3 codes, each byte sign-extended to its int32 lane (vi_load_i8) → exact fp32 values (s_e4m3_decode).
inline VF vf_e4m3_decode(VI code) {
    const __m512i u = _mm512_slli_epi32(code.v, 20);
    const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x07f00000));
    const __mmask16 sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(0x00800000));
    __m512 a = _mm512_castsi512_ps(_mm512_add_epi32(mag, _mm512_set1_epi32(120 << 23)));
    a = _mm512_mask_fmsub_ps(a, sub, _mm512_set1_ps(2.0f), _mm512_set1_ps(0x1p-6f));
    // a | (u & sign)
    return {_mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(_mm512_castps_si512(a), u, _mm512_set1_epi32(static_cast<int32_t>(0x80000000u)), 0xf8))};
}
// kLanes e4m3 codes at p → their exact fp32 values. AVX-512's masked decode is already six instructions; the
// binary16 route (the comment on vf_load_e4m3 above) is AVX2's.
inline VF vf_load_e4m3(const uint8_t* p) { return vf_e4m3_decode(vi_load_i8(p)); }

#elif defined(__AVX2__)

inline constexpr int kLanes = 8;
struct VF {
    __m256 v;
};
struct VI {
    __m256i v;
};

inline VF vf_zero() { return {_mm256_setzero_ps()}; }
inline VF vf_set1(float a) { return {_mm256_set1_ps(a)}; }
inline VF vf_load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void vf_store(float* p, VF a) { _mm256_storeu_ps(p, a.v); }
inline VF vf_load_bf16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
}
inline void vf_store_bf16(uint16_t* p, VF a) {
    const __m256i u = _mm256_castps_si256(a.v);
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
    r = _mm256_srli_epi32(r, 16);  // 8 × 16-bit values in the low halves of the lanes
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
inline VF vf_add(VF a, VF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VF vf_sub(VF a, VF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VF vf_mul(VF a, VF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VF vf_fma(VF a, VF b, VF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VF vf_min(VF a, VF b) { return {_mm256_min_ps(a.v, b.v)}; }
inline VF vf_max(VF a, VF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline float vf_sum(VF a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline VF vf_swap_pairs(VF a) { return {_mm256_permute_ps(a.v, 0xb1)}; }
inline VF vf_butterfly(VF a, int h) {
    __m256 p;
    const __m256 sum_in = a.v;
    switch (h) {
        case 1: p = _mm256_permute_ps(a.v, 0xb1); return {_mm256_blend_ps(_mm256_add_ps(sum_in, p), _mm256_sub_ps(p, a.v), 0xaa)};
        case 2: p = _mm256_permute_ps(a.v, 0x4e); return {_mm256_blend_ps(_mm256_add_ps(sum_in, p), _mm256_sub_ps(p, a.v), 0xcc)};
        default: p = _mm256_permute2f128_ps(a.v, a.v, 0x01); return {_mm256_blend_ps(_mm256_add_ps(sum_in, p), _mm256_sub_ps(p, a.v), 0xf0)};
    }
}

inline VI vi_load(const int32_t* p) { return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))}; }
inline void vi_store(int32_t* p, VI a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), a.v); }
inline VI vi_set1(int32_t a) { return {_mm256_set1_epi32(a)}; }
inline VI vi_bits(VF a) { return {_mm256_castps_si256(a.v)}; }
inline VF vf_from_bits(VI a) { return {_mm256_castsi256_ps(a.v)}; }
inline VI vi_and(VI a, VI b) { return {_mm256_and_si256(a.v, b.v)}; }
inline VI vi_or(VI a, VI b) { return {_mm256_or_si256(a.v, b.v)}; }
inline VI vi_xor(VI a, VI b) { return {_mm256_xor_si256(a.v, b.v)}; }
inline VI vi_add(VI a, VI b) { return {_mm256_add_epi32(a.v, b.v)}; }
inline VI vi_sub(VI a, VI b) { return {_mm256_sub_epi32(a.v, b.v)}; }
inline VI vi_max(VI a, VI b) { return {_mm256_max_epi32(a.v, b.v)}; }
template <int n> inline VI vi_shl(VI a) { return {_mm256_slli_epi32(a.v, n)}; }
template <int n> inline VI vi_shr(VI a) { return {_mm256_srli_epi32(a.v, n)}; }
template <int n> inline VI vi_sar(VI a) { return {_mm256_srai_epi32(a.v, n)}; }
inline int32_t vi_hmax(VI a) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(a.v), _mm256_extracti128_si256(a.v, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}
inline uint32_t vi_mask_of(__m256i m) { return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(m))); }
inline uint32_t vi_lt_mask(VI a, VI b) { return vi_mask_of(_mm256_cmpgt_epi32(b.v, a.v)); }
inline uint32_t vi_ge_mask(VI a, VI b) { return ~vi_lt_mask(a, b) & 0xffu; }
inline uint32_t vi_eq_mask(VI a, VI b) { return vi_mask_of(_mm256_cmpeq_epi32(a.v, b.v)); }
inline VI vi_select(uint32_t mask, VI if_set, VI if_clear) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i m = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int32_t>(mask)), bit), bit);
    return {_mm256_blendv_epi8(if_clear.v, if_set.v, m)};
}
inline VI vi_cvt_rne(VF a) { return {_mm256_cvtps_epi32(a.v)}; }
inline VI vi_load_i8(const uint8_t* p) {
    return {_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))};
}
inline void vi_store_u8(uint8_t* p, VI a) {
    const __m256i bytes = _mm256_shuffle_epi8(a.v, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                       -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1,
                                                                       -1, -1, -1, -1, -1, -1));
    const uint32_t lo = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(bytes)));
    const uint32_t hi = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1)));
    __builtin_memcpy(p, &lo, 4);
    __builtin_memcpy(p + 4, &hi, 4);
}
inline int vi_compress_store(int32_t* out, uint32_t mask, VI a) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a.v);
    int n = 0;
    while (mask) {
        out[n++] = lanes[__builtin_ctz(mask)];
        mask &= mask - 1;
    }
    return n;
}
inline VI vi_iota() { return {_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)}; }
inline VF vf_e4m3_decode(VI code) {
    const __m256i u = _mm256_slli_epi32(code.v, 20);
    const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x07f00000));
    const __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), mag);
    const __m256 a = _mm256_castsi256_ps(_mm256_add_epi32(mag, _mm256_set1_epi32(120 << 23)));
    const __m256 fixed = _mm256_fmsub_ps(a, _mm256_set1_ps(2.0f), _mm256_set1_ps(0x1p-6f));
    const __m256 v = _mm256_blendv_ps(a, fixed, _mm256_castsi256_ps(sub));
    return {_mm256_or_ps(v, _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(static_cast<int32_t>(0x80000000u)))))};
}
// kLanes e4m3 codes at p → their exact fp32 values, through binary16 (the comment on vf_load_e4m3 above).
inline VF vf_load_e4m3(const uint8_t* p) {
    const __m128i c = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256 v = _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(c, 7), _mm_set1_epi16(static_cast<int16_t>(0xbf80))));
    return {_mm256_mul_ps(v, _mm256_set1_ps(0x1p8f))};
}

#else  // portable scalar: one lane

inline constexpr int kLanes = 1;
struct VF {
    float v;
};
struct VI {
    int32_t v;
};

inline VF vf_zero() { return {0.0f}; }
inline VF vf_set1(float a) { return {a}; }
inline VF vf_load(const float* p) { return {*p}; }
inline void vf_store(float* p, VF a) { *p = a.v; }
inline VF vf_load_bf16(const uint16_t* p) { return {s_bf16_to_f32(*p)}; }
inline void vf_store_bf16(uint16_t* p, VF a) { *p = s_f32_to_bf16(a.v); }
inline VF vf_add(VF a, VF b) { return {a.v + b.v}; }
inline VF vf_sub(VF a, VF b) { return {a.v - b.v}; }
inline VF vf_mul(VF a, VF b) { return {a.v * b.v}; }
inline VF vf_fma(VF a, VF b, VF c) { return {a.v * b.v + c.v}; }  // two roundings: no FMA in the baseline ISA
// MINPS / MAXPS exactly: a < b ? a : b and a > b ? a : b, so a NaN in either operand, and a pair of
// zeros of either sign, give the second operand (Intel SDM, MINPS/MAXPS), as in the vector paths above.
inline VF vf_min(VF a, VF b) { return {a.v < b.v ? a.v : b.v}; }
inline VF vf_max(VF a, VF b) { return {a.v > b.v ? a.v : b.v}; }
inline float vf_sum(VF a) { return a.v; }
// One lane has no pairs: the kLanes == 1 paths of the kernels never call these two.
inline VF vf_swap_pairs(VF a) { return a; }
inline VF vf_butterfly(VF a, int) { return a; }

inline VI vi_load(const int32_t* p) { return {*p}; }
inline void vi_store(int32_t* p, VI a) { *p = a.v; }
inline VI vi_set1(int32_t a) { return {a}; }
inline VI vi_bits(VF a) { return {static_cast<int32_t>(bits_of(a.v))}; }
inline VF vf_from_bits(VI a) { return {float_of(static_cast<uint32_t>(a.v))}; }
inline VI vi_and(VI a, VI b) { return {a.v & b.v}; }
inline VI vi_or(VI a, VI b) { return {a.v | b.v}; }
inline VI vi_xor(VI a, VI b) { return {a.v ^ b.v}; }
inline VI vi_add(VI a, VI b) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) + static_cast<uint32_t>(b.v))}; }
inline VI vi_sub(VI a, VI b) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) - static_cast<uint32_t>(b.v))}; }
inline VI vi_max(VI a, VI b) { return {a.v > b.v ? a.v : b.v}; }
template <int n> inline VI vi_shl(VI a) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) << n)}; }
template <int n> inline VI vi_shr(VI a) { return {static_cast<int32_t>(static_cast<uint32_t>(a.v) >> n)}; }
template <int n> inline VI vi_sar(VI a) { return {a.v >> n}; }
inline int32_t vi_hmax(VI a) { return a.v; }
inline uint32_t vi_lt_mask(VI a, VI b) { return a.v < b.v ? 1u : 0u; }
inline uint32_t vi_ge_mask(VI a, VI b) { return a.v >= b.v ? 1u : 0u; }
inline uint32_t vi_eq_mask(VI a, VI b) { return a.v == b.v ? 1u : 0u; }
inline VI vi_select(uint32_t mask, VI if_set, VI if_clear) { return mask ? if_set : if_clear; }
// CVTPS2DQ exactly: NaN and values that round outside int32 give the "integer indefinite" INT32_MIN
// (Intel SDM, CVTPS2DQ), where a plain cast would be undefined behaviour.
inline VI vi_cvt_rne(VF a) {
    const float r = __builtin_nearbyintf(a.v);
    return {r >= -2147483648.0f && r < 2147483648.0f ? static_cast<int32_t>(r) : INT32_MIN};
}
inline VI vi_load_i8(const uint8_t* p) { return {static_cast<int8_t>(*p)}; }
inline void vi_store_u8(uint8_t* p, VI a) { *p = static_cast<uint8_t>(a.v); }
inline int vi_compress_store(int32_t* out, uint32_t mask, VI a) {
    if (!mask) return 0;
    *out = a.v;
    return 1;
}
inline VI vi_iota() { return {0}; }
inline VF vf_e4m3_decode(VI code) { return {s_e4m3_decode(static_cast<uint8_t>(code.v))}; }
inline VF vf_load_e4m3(const uint8_t* p) { return {s_e4m3_decode(*p)}; }

#endif

// ---- helpers built on the layer ----------------------------------------------------------------

// e4m3 byte → its exact value, the NaN bytes 0x7F / 0xFF → a quiet NaN of their sign (core/dtype.h
// fp8_e4m3_to_f32): the byte's fields give value · 2^-120 (s_e4m3_scaled), then · 2^120; both exact.
inline float s_e4m3_value(uint8_t b) {
    if ((b & 0x7fu) == 0x7fu) return float_of(0x7fc00000u | (static_cast<uint32_t>(b & 0x80u) << 24));
    return s_e4m3_scaled(b) * float_of(0x7b800000u);  // 2^120
}
// kLanes e4m3 bytes → their values, as s_e4m3_value.
inline VF vf_e4m3_values(const uint8_t* p) {
    const VI code = vi_load_i8(p);  // sign-extended: bit 31 = the byte's sign
    const VF scaled = vf_from_bits(vi_and(vi_shl<20>(code), vi_set1(static_cast<int32_t>(0x87f00000u))));
    const VF v = vf_mul(scaled, vf_set1(float_of(0x7b800000u)));
    const uint32_t nan = vi_eq_mask(vi_and(code, vi_set1(0x7f)), vi_set1(0x7f));
    if (nan == 0) return v;
    return vf_from_bits(
        vi_select(nan, vi_or(vi_and(code, vi_set1(static_cast<int32_t>(0x80000000u))), vi_set1(0x7fc00000)), vi_bits(v)));
}

// f32 lanes rounded to bf16 and widened back (RNE, NaN kept quiet with its sign: core f32_to_bf16).
inline VF vf_round_bf16(VF v) {
    const VI u = vi_bits(v);
    const VI nan = vi_or(u, vi_set1(0x00400000));
    const VI rounded = vi_add(u, vi_add(vi_set1(0x7fff), vi_and(vi_shr<16>(u), vi_set1(1))));
    const uint32_t is_nan = vi_lt_mask(vi_set1(0x7f800000), vi_and(u, vi_set1(0x7fffffff)));
    return vf_from_bits(vi_and(vi_select(is_nan, nan, rounded), vi_set1(static_cast<int32_t>(0xffff0000u))));
}

inline VF vf_load_row(const void* base, bool bf16, int64_t i) {
    return bf16 ? vf_load_bf16(static_cast<const uint16_t*>(base) + i) : vf_load(static_cast<const float*>(base) + i);
}
inline void vf_store_row(void* base, bool bf16, int64_t i, VF a) {
    if (bf16)
        vf_store_bf16(static_cast<uint16_t*>(base) + i, a);
    else
        vf_store(static_cast<float*>(base) + i, a);
}

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

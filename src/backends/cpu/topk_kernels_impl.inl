// Kernel bodies of the streaming top-k (ops/topk.h, fused_topk.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

// Ranking key of a score: a signed int whose order is the ranking order of ops/topk.h:
// sign-magnitude bits → two's complement (−0.0 and +0.0 both map to 0), and NaN → INT32_MIN, below −inf.
inline VI topk_rank_key(VF v) {
    const VI bits = vi_bits(v);
    const VI mag = vi_and(bits, vi_set1(0x7fffffff));
    VI key = vi_select(vi_lt_mask(bits, vi_set1(0)), vi_sub(vi_set1(0), mag), mag);
    return vi_select(vi_lt_mask(vi_set1(0x7f800000), mag), vi_set1(INT32_MIN), key);
}
inline int32_t s_topk_rank_key(float f) {
    const uint32_t bits = bits_of(f);
    const int32_t mag = static_cast<int32_t>(bits & 0x7fffffffu);
    if (mag > 0x7f800000) return INT32_MIN;
    return (bits >> 31) ? -mag : mag;
}

// Keeps the best s->k of the buffered candidates (ties to the earlier one), in order; raises the
// admission threshold to (smallest kept key + 1).
// Radix select on u = key ^ 0x80000000 (unsigned order = key order) for the k-th largest u = T: keep
// every u > T and the first `quota` with u == T. Digits are 8 bits wide, starting at the highest bit on
// which the buffered keys differ (admitted keys share their top bits). Both passes are branchless:
// which bin or which entry is data-dependent and would mispredict.
void topk_stream_cut(TopkStream* s) {
    const int64_t n = s->count;
    if (n <= s->k) return;
    const int32_t* keys = s->keys;
    const uint32_t u0 = static_cast<uint32_t>(keys[0]) ^ 0x80000000u;
    uint32_t diff = 0;
    for (int64_t j = 0; j < n; ++j) diff |= (static_cast<uint32_t>(keys[j]) ^ 0x80000000u) ^ u0;
    uint32_t t = u0;
    int64_t need = s->k, quota = need;  // all keys equal: T = u0, keep the first k
    if (diff != 0) {
        const int top = 31 - __builtin_clz(diff);
        uint32_t prefix_mask = top == 31 ? 0u : ~((2u << top) - 1u);  // bits above top: equal in every key
        uint32_t prefix = u0 & prefix_mask;
        bool whole_bin = false;
        for (int shift = top - 7;; shift -= 8) {
            // digit = the 8 bits [shift, shift + 8) of u; a negative shift takes the low bits, left-aligned
            const int rs = shift > 0 ? shift : 0, ls = shift < 0 ? -shift : 0;
            const uint32_t digit_mask = (0xffu >> ls) << rs;
            uint32_t hist[257];  // bin 256 collects the entries outside the current prefix
            for (int d = 0; d < 257; ++d) hist[d] = 0;
            for (int64_t j = 0; j < n; ++j) {
                const uint32_t u = static_cast<uint32_t>(keys[j]) ^ 0x80000000u;
                const uint32_t digit = ((u >> rs) << ls) & 0xffu;
                ++hist[(u & prefix_mask) == prefix ? digit : 256u];
            }
            int64_t above = 0;
            int d = 255;
            for (; d > 0; --d) {
                if (above + static_cast<int64_t>(hist[d]) >= need) break;
                above += hist[d];
            }
            need -= above;
            prefix |= (static_cast<uint32_t>(d) >> ls) << rs;  // the digit back in its bit position
            prefix_mask |= digit_mask;
            if (static_cast<int64_t>(hist[d]) == need) {  // the whole bin is kept: keep every u ≥ prefix
                t = prefix - 1;  // prefix ≥ 1: else every entry would be kept, but n > k
                quota = 0;
                whole_bin = true;
                break;
            }
            if (shift <= 0) break;
        }
        if (!whole_bin) {
            t = prefix;  // all bits resolved
            quota = need;
        }
    }
    int64_t w = 0;
    int32_t kmin = INT32_MAX;
    int32_t* idx = s->idx;
    int32_t* out_keys = s->keys;
    for (int64_t j = 0; j < n; ++j) {  // stable, in place (w ≤ j), branchless
        const int32_t key = out_keys[j];
        const uint32_t u = static_cast<uint32_t>(key) ^ 0x80000000u;
        const int64_t tie = (u == t) & (quota > 0);
        const int64_t keep = (u > t) | tie;
        quota -= tie;
        out_keys[w] = key;
        idx[w] = idx[j];
        const int32_t candidate = keep ? key : INT32_MAX;
        kmin = candidate < kmin ? candidate : kmin;
        w += keep;
    }
    s->count = w;
    s->threshold = kmin + 1;  // kmin ≤ key(+inf) < INT32_MAX: no overflow
}

void topk_stream_push(TopkStream* s, const float* scores, int64_t n, int64_t base) {
    int64_t i = 0;
    VI threshold = vi_set1(s->threshold);
    for (; i + kLanes <= n; i += kLanes) {
        const VI key = topk_rank_key(vf_load(scores + i));
        const uint32_t admit = vi_ge_mask(key, threshold);
        if (!admit) continue;
        if (s->capacity - s->count < kLanes) {
            topk_stream_cut(s);
            // a cut leaves k entries and capacity ≥ k + kTopkStreamSlack; anything else is a bug: stop
            // loudly rather than spin
            if (s->capacity - s->count < kLanes) __builtin_trap();
            threshold = vi_set1(s->threshold);
            // re-test this vector against the raised threshold
            i -= kLanes;
            continue;
        }
        const VI idx = vi_add(vi_iota(), vi_set1(static_cast<int32_t>(base + i)));
        vi_compress_store(s->keys + s->count, admit, key);
        s->count += vi_compress_store(s->idx + s->count, admit, idx);
    }
    for (; i < n; ++i) {
        const int32_t key = s_topk_rank_key(scores[i]);
        if (key < s->threshold) continue;
        if (s->count == s->capacity) {
            topk_stream_cut(s);
            if (s->count == s->capacity) __builtin_trap();
            if (key < s->threshold) continue;
        }
        s->keys[s->count] = key;
        s->idx[s->count] = static_cast<int32_t>(base + i);
        ++s->count;
    }
}

int64_t topk_stream_finish(TopkStream* s, int32_t* out) {
    topk_stream_cut(s);
    for (int64_t j = 0; j < s->count; ++j) out[j] = s->idx[j];
    return s->count;
}

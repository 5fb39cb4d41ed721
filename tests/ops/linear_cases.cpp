// run_linear_case (harness.h): one linear case on ref and every backend under test, compared with
// dot_tolerance from K and Σ|x·w| of the values the math sees.
#include <cstdio>
#include <limits>

#include "harness.h"

namespace sieve::test {


namespace {

std::string describe(const LinearCase& c) {
    return fmt::format("m {} n {} k {} W {} x {} y {} math {} bias {} padded {} x_broadcast {} scales {} groups {}", c.m,
                       c.n, c.k, dtype_name(c.w_type), dtype_name(c.x_type), dtype_name(c.y_type), linear_math_name(c.math),
                       c.bias, c.padded, c.x_broadcast, static_cast<int>(c.scales), c.groups);
}

// The weights of one case, as stored and as the math sees them ([n, k] fp32, ops/linear.h).
struct CaseWeights {
    GuardedBuffer stored, scales, bias;
    int64_t row_stride;
    std::vector<double> effective;
    std::vector<double> bias_values;
};

}  // namespace

namespace {
CaseWeights make_weights(Rng& rng, const LinearCase& c) {
    const int64_t row_stride = c.k + (c.padded ? rng.integer(1, 5) : 0);
    const int64_t n_nb = (c.n + 127) / 128, n_kb = (c.k + 127) / 128;
    CaseWeights w{GuardedBuffer(static_cast<size_t>(c.n * row_stride) * dtype_size(c.w_type)),
                  GuardedBuffer(static_cast<size_t>(n_nb * n_kb) * 4), GuardedBuffer(static_cast<size_t>(c.n) * 4),
                  row_stride, {}, {}};
    const float std_w = 1.0f / std::sqrt(static_cast<float>(c.k));
    for (int64_t b = 0; b < n_nb * n_kb; ++b) {
        float s = std::ldexp(1.0f, static_cast<int>(rng.integer(-9, -3)));
        if (c.scales == ScaleKind::arbitrary) s = rng.uniform(0.001f, 0.05f);
        if (c.scales == ScaleKind::huge && b == 0) s = 200.0f;  // ≥ 2^7: the fused fp8 kernel cannot take it
        w.scales.as<float>()[b] = s;
    }
    for (int64_t o = 0; o < c.n; ++o)
        for (int64_t i = 0; i < c.k; ++i) {
            const int64_t at = o * row_stride + i;
            if (c.w_type == DType::f8_e4m3) {
                uint8_t byte = static_cast<uint8_t>(rng.integer(0, 255));
                if ((byte & 0x7f) == 0x7f) byte ^= 0x01;  // no NaN codes except where asked
                w.stored.as<uint8_t>()[at] = byte;
            } else if (c.w_type == DType::bf16) {
                w.stored.as<uint16_t>()[at] = f32_to_bf16(rng.normal(std_w));
            } else {
                w.stored.as<float>()[at] = rng.normal(std_w);
            }
        }
    if (c.scales == ScaleKind::nan_byte && c.w_type == DType::f8_e4m3)
        w.stored.as<uint8_t>()[(c.n / 2) * row_stride + c.k / 2] = 0x7f;
    w.effective.resize(static_cast<size_t>(c.n * c.k));
    for (int64_t o = 0; o < c.n; ++o)
        for (int64_t i = 0; i < c.k; ++i) {
            const int64_t at = o * row_stride + i;
            float v = 0;
            if (c.w_type == DType::f8_e4m3)
                v = fp8_e4m3_to_f32(w.stored.as<uint8_t>()[at]) * w.scales.as<float>()[(o / 128) * n_kb + i / 128];
            else if (c.w_type == DType::bf16)
                v = bf16_to_f32(w.stored.as<uint16_t>()[at]);
            else
                v = w.stored.as<float>()[at];
            if (c.math == LinearMath::bf16) v = round_to_bf16(v);
            w.effective[static_cast<size_t>(o * c.k + i)] = v;
        }
    for (int64_t o = 0; o < c.n; ++o) {
        w.bias.as<float>()[o] = rng.uniform(-1.0f, 1.0f);
        w.bias_values.push_back(c.bias ? w.bias.as<float>()[o] : 0.0);
    }
    return w;
}
}  // namespace

void run_linear_case(Rng& rng, const LinearCase& c, Backend& ref, const std::vector<NamedBackend>& backends) {
    SCOPED_TRACE(describe(c));
    CaseWeights w = make_weights(rng, c);
    LinearWeights lw;
    lw.weight = w.stored.data();
    lw.block_scale = c.w_type == DType::f8_e4m3 ? w.scales.as<float>() : nullptr;
    lw.bias = c.bias ? w.bias.data() : nullptr;
    lw.out_features = c.n;
    lw.in_features = c.k;
    lw.groups = c.groups;
    lw.weight_row_stride = w.row_stride;
    lw.weight_type = c.w_type;
    lw.bias_type = DType::f32;
    lw.math = c.math;

    const int64_t kx = c.groups * c.k, group_rows = c.n / c.groups;  // x values per row; output rows per group
    const int64_t x_stride = c.x_broadcast ? 0 : kx + (c.padded ? rng.integer(1, 7) : 0);
    const int64_t y_stride = c.n + (c.padded ? rng.integer(1, 7) : 0);
    const size_t x_bytes = static_cast<size_t>(std::max<int64_t>((c.m - 1) * x_stride + kx, 1)) * dtype_size(c.x_type);
    const size_t y_bytes = static_cast<size_t>(std::max<int64_t>((c.m - 1) * y_stride + c.n, 1)) * dtype_size(c.y_type);
    GuardedBuffer x(x_bytes);
    fill_rows(x.data(), c.x_type, c.m, 1, kx, x_stride, 0, [&] { return rng.normal(1.0f); });
    LinearParams p;
    p.x = x.data();
    p.n_tokens = c.m;
    p.x_row_stride = x_stride;
    p.y_row_stride = y_stride;
    p.x_type = c.x_type;
    p.y_type = c.y_type;

    auto run = [&](Backend& b, GuardedBuffer& y) -> Status {
        SIEVE_ASSIGN_OR_RETURN(auto prepared, b.linear_prepare(lw));
        SIEVE_ASSIGN_OR_RETURN(LinearPlan plan, b.linear_plan(*prepared, p));
        GuardedBuffer ws(std::max<size_t>(plan.workspace_bytes, 1));
        LinearParams q = p;
        q.y = y.data();
        SIEVE_RETURN_IF_ERROR(b.linear(*prepared, plan, q, {ws.data(), plan.workspace_bytes}));
        EXPECT_TRUE(ws.guards_intact("linear workspace"));
        return Status::ok();
    };
    GuardedBuffer y_ref(y_bytes);
    const Status st_ref = run(ref, y_ref);
    ASSERT_TRUE(st_ref.is_ok()) << st_ref.to_string();
    // ref's y against the contract's sum (double), then every backend against ref's y.
    std::vector<double> want, tol, exact;
    for (int64_t t = 0; t < c.m; ++t)
        for (int64_t o = 0; o < c.n; ++o) {
            const double yv = load_as_f32(y_ref.data(), c.y_type, t * y_stride + o);
            const int64_t x0 = (o / group_rows) * c.k;  // output o reads its group's x values
            double sum = w.bias_values[static_cast<size_t>(o)], sum_abs = 0;
            for (int64_t i = 0; i < c.k; ++i) {
                float xv = load_as_f32(x.data(), c.x_type, t * x_stride + x0 + i);
                if (c.math == LinearMath::bf16) xv = round_to_bf16(xv);
                const double pr = static_cast<double>(xv) * w.effective[static_cast<size_t>(o * c.k + i)];
                sum += pr;
                sum_abs += std::fabs(pr);
            }
            want.push_back(yv);
            exact.push_back(sum);
            tol.push_back(dot_tolerance(c.k, sum_abs, std::fabs(yv), std::fabs(w.bias_values[static_cast<size_t>(o)]),
                                        c.y_type == DType::bf16));
        }
    EXPECT_TRUE(all_close(exact, want, tol, "ref linear y against the contract's sum"));
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        GuardedBuffer y(y_bytes);
        const Status st = run(*nb.backend, y);
        if (linear_unsupported_is_expected(nb.spec, c.math, st)) {
            std::printf("  %s: %s (expected)\n", nb.spec.c_str(), st.to_string().c_str());
            continue;
        }
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        std::vector<double> got;
        for (int64_t t = 0; t < c.m; ++t)
            for (int64_t o = 0; o < c.n; ++o) got.push_back(load_as_f32(y.data(), c.y_type, t * y_stride + o));
        EXPECT_TRUE(all_close(want, got, tol, "linear y"));
        EXPECT_TRUE(y.guards_intact("linear y"));
        EXPECT_TRUE(untouched_outside_rows(y, c.m, 1, c.n, y_stride, 0, dtype_size(c.y_type), "linear y"));
    }
}

}  // namespace sieve::test

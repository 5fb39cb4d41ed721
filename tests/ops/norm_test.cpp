// Conformance of RMSNorm and LayerNorm: every backend under test against ref, tolerances from
// the row length (derivations inline).
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/rms_norm.h"
#include "rows.h"

namespace sieve::test {
namespace {

struct NormCase {
    int64_t n_tokens, n_heads, dim;
    DType x_type, y_type;
    bool padded, in_place;
    float eps;
    float scale;  // input magnitude
};

std::vector<NormCase> norm_cases(uint64_t seed, int count) {
    Rng rng(seed);
    const std::vector<int64_t> dims = {1, 2, 7, 16, 31, 64, 100, 128, 257, 512, 1000, 4096};
    std::vector<NormCase> cases;
    for (int c = 0; c < count; ++c) {
        NormCase nc;
        nc.dim = dims[static_cast<size_t>(c) % dims.size()];
        nc.n_tokens = rng.pick<int64_t>({1, 2, 5});
        nc.n_heads = rng.pick<int64_t>({1, 3});
        nc.x_type = rng.coin() ? DType::bf16 : DType::f32;
        nc.y_type = rng.coin() ? DType::bf16 : DType::f32;
        nc.padded = rng.coin();
        nc.in_place = nc.x_type == nc.y_type && rng.coin(0.3);
        nc.eps = rng.pick<float>({1e-6f, 1e-5f, 0.25f});  // 0.25: an eps that visibly moves the result
        nc.scale = rng.pick<float>({1e-3f, 1.0f, 300.0f});
        cases.push_back(nc);
    }
    return cases;
}

std::string describe(const NormCase& c) {
    return fmt::format("[{}, {}, {}] x {} y {} padded {} in_place {} eps {} scale {}", c.n_tokens, c.n_heads, c.dim,
                       dtype_name(c.x_type), dtype_name(c.y_type), c.padded, c.in_place, c.eps, c.scale);
}

TEST(RmsNormConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    int case_index = 0;
    // Then a decode step's per-head norms: 1024 rows (the cuda backend then takes a warp a row).
    std::vector<NormCase> cases = norm_cases(101, 36), many_rows = norm_cases(103, 3);
    const int64_t many_rows_dims[] = {100, 512, 31};
    for (size_t i = 0; i < many_rows.size(); ++i) {
        many_rows[i].n_tokens = 64;
        many_rows[i].n_heads = 16;
        many_rows[i].dim = many_rows_dims[i];
        cases.push_back(many_rows[i]);
    }
    for (const NormCase& c : cases) {
        const RmsNormWeight mode = std::vector<RmsNormWeight>{RmsNormWeight::none, RmsNormWeight::multiply,
                                                              RmsNormWeight::one_plus}[case_index++ % 3];
        SCOPED_TRACE(describe(c) + fmt::format(" mode {}", static_cast<int>(mode)));
        Rng rng(static_cast<uint64_t>(case_index) * 7919);
        const RowsLayout xl = make_rows_layout(rng, c.n_tokens, c.n_heads, c.dim, c.padded);
        const RowsLayout yl = c.in_place ? xl : make_rows_layout(rng, c.n_tokens, c.n_heads, c.dim, c.padded);
        RowsTensor x(xl, c.x_type);
        x.fill([&] { return rng.normal(c.scale); });
        GuardedBuffer weight(static_cast<size_t>(c.dim) * 4);
        for (int64_t i = 0; i < c.dim; ++i) weight.as<float>()[i] = rng.uniform(-2.0f, 2.0f);

        auto run = [&](Backend& b, RowsTensor& y_out, RowsTensor& x_work) {
            RmsNormParams p;
            p.x = x_work.data();
            p.y = c.in_place ? x_work.data() : y_out.data();
            p.weight = mode == RmsNormWeight::none ? nullptr : weight.as<float>();
            p.weight_mode = mode;
            p.n_tokens = c.n_tokens;
            p.n_heads = c.n_heads;
            p.dim = c.dim;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.eps = c.eps;
            p.x_type = c.x_type;
            p.y_type = c.y_type;
            return b.rms_norm(p);
        };
        RowsTensor x_ref(xl, c.x_type), y_ref(yl, c.y_type);
        x_ref.copy_from(x);
        ASSERT_TRUE(run(*ref, y_ref, x_ref).is_ok());
        const RowsTensor& want_t = c.in_place ? x_ref : y_ref;
        const std::vector<double> want = want_t.values();
        // Tolerance: ms = Σv²/dim has relative error ≤ γ_dim (positive terms); sqrt halves it, and the
        // +eps, sqrt, 1/x, v·inv, ·g steps add ≤ 6u; ref adds its own ≤ 6u: |Δy| ≤ |y|·(γ_dim/2 + 12u),
        // plus one bf16 ulp for a bf16 output.
        std::vector<double> tol(want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            tol[i] = std::fabs(want[i]) * (gamma_n(static_cast<double>(c.dim)) / 2 + 12 * kU) + 1e-30;
            if (c.y_type == DType::bf16) tol[i] += bf16_ulp(std::fabs(want[i]) + tol[i]);
        }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor x_work(xl, c.x_type), y(yl, c.y_type);
            x_work.copy_from(x);
            const Status st = run(*nb.backend, y, x_work);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            const RowsTensor& got_t = c.in_place ? x_work : y;
            EXPECT_TRUE(all_close(want, got_t.values(), tol, "rms_norm y"));
            EXPECT_TRUE(got_t.intact("rms_norm y"));
            if (!c.in_place) {
                EXPECT_TRUE(bytes_equal(x.data(), x_work.data(), x.buf.bytes(), "rms_norm x unchanged"));
            }
        }
    }
}

TEST(LayerNormConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    int case_index = 0;
    for (const NormCase& c : norm_cases(202, 30)) {
        const bool with_weight = case_index % 2 == 0, with_bias = case_index % 3 != 0;
        ++case_index;
        SCOPED_TRACE(describe(c) + fmt::format(" weight {} bias {}", with_weight, with_bias));
        Rng rng(static_cast<uint64_t>(case_index) * 104729);
        const RowsLayout xl = make_rows_layout(rng, c.n_tokens, c.n_heads, c.dim, c.padded);
        const RowsLayout yl = c.in_place ? xl : make_rows_layout(rng, c.n_tokens, c.n_heads, c.dim, c.padded);
        RowsTensor x(xl, c.x_type);
        const float offset = rng.uniform(-1.0f, 1.0f) * c.scale;  // a mean to subtract, of the data's size
        x.fill([&] { return offset + rng.normal(c.scale); });
        GuardedBuffer weight(static_cast<size_t>(c.dim) * 4), bias(static_cast<size_t>(c.dim) * 4);
        for (int64_t i = 0; i < c.dim; ++i) {
            weight.as<float>()[i] = rng.uniform(-2.0f, 2.0f);
            bias.as<float>()[i] = rng.uniform(-1.0f, 1.0f);
        }
        auto run = [&](Backend& b, RowsTensor& y_out, RowsTensor& x_work) {
            LayerNormParams p;
            p.x = x_work.data();
            p.y = c.in_place ? x_work.data() : y_out.data();
            p.weight = with_weight ? weight.as<float>() : nullptr;
            p.bias = with_bias ? bias.as<float>() : nullptr;
            p.n_tokens = c.n_tokens;
            p.n_heads = c.n_heads;
            p.dim = c.dim;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.eps = c.eps;
            p.x_type = c.x_type;
            p.y_type = c.y_type;
            return b.layer_norm(p);
        };
        RowsTensor x_ref(xl, c.x_type), y_ref(yl, c.y_type);
        x_ref.copy_from(x);
        ASSERT_TRUE(run(*ref, y_ref, x_ref).is_ok());
        const std::vector<double> want = (c.in_place ? x_ref : y_ref).values();
        // Tolerance, per row with n = dim, A = mean|v|, d_i = v_i − mean, inv = 1/sqrt(var + eps):
        // the fp32 mean is off by Δ ≤ γ_n·A; var's sum of squares by ≤ γ_n·var plus Δ² (Σd_i = 0 kills the
        // first-order term); so inv is off by ≤ inv·(γ_n/2 + Δ²/(2(var+eps)) + 4u), and
        // |Δy_i| ≤ |w_i|·(inv·(Δ + u|d_i|) + |d_i|·Δinv) + 2u(|y_i| + |b_i|), doubled for the two sides.
        std::vector<double> tol(want.size());
        size_t o = 0;
        for (int64_t tk = 0; tk < c.n_tokens; ++tk) {
            for (int64_t h = 0; h < c.n_heads; ++h) {
                const int64_t n = c.dim;
                double mean = 0, abs_mean = 0, var = 0;
                for (int64_t i = 0; i < n; ++i) {
                    mean += x.get(tk, h, i);
                    abs_mean += std::fabs(x.get(tk, h, i));
                }
                mean /= static_cast<double>(n);
                abs_mean /= static_cast<double>(n);
                for (int64_t i = 0; i < n; ++i) var += (x.get(tk, h, i) - mean) * (x.get(tk, h, i) - mean);
                var /= static_cast<double>(n);
                const double g = gamma_n(static_cast<double>(n));
                const double delta = g * abs_mean;
                const double inv = 1.0 / std::sqrt(var + c.eps);
                const double dinv = inv * (g / 2 + delta * delta / (2 * (var + c.eps)) + 4 * kU);
                for (int64_t i = 0; i < n; ++i, ++o) {
                    const double d = std::fabs(x.get(tk, h, i) - mean);
                    const double w = with_weight ? std::fabs(weight.as<float>()[i]) : 1.0;
                    const double b = with_bias ? std::fabs(bias.as<float>()[i]) : 0.0;
                    tol[o] = 2 * (w * (inv * (delta + kU * d) + d * dinv) + 2 * kU * (std::fabs(want[o]) + b)) + 1e-30;
                    if (c.y_type == DType::bf16) tol[o] += bf16_ulp(std::fabs(want[o]) + tol[o]);
                }
            }
        }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor x_work(xl, c.x_type), y(yl, c.y_type);
            x_work.copy_from(x);
            const Status st = run(*nb.backend, y, x_work);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            const RowsTensor& got_t = c.in_place ? x_work : y;
            EXPECT_TRUE(all_close(want, got_t.values(), tol, "layer_norm y"));
            EXPECT_TRUE(got_t.intact("layer_norm y"));
        }
    }
}

}  // namespace
}  // namespace sieve::test

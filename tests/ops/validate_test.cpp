// validate(): each malformed params struct is rejected with invalid_argument and a message naming
// the field and the values; backends return that Status unchanged.
#include "harness.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/topk.h"

namespace sieve::test {
namespace {

// The Status is `code` and its message contains `needle`.
testing::AssertionResult rejected(const Status& st, StatusCode code, const std::string& needle) {
    if (st.is_ok()) return testing::AssertionFailure() << "accepted, expected " << status_code_name(code) << " ~ " << needle;
    if (st.code() != code)
        return testing::AssertionFailure() << "got " << st.to_string() << ", expected " << status_code_name(code);
    if (st.message().find(needle) == std::string::npos)
        return testing::AssertionFailure() << "message '" << st.message() << "' lacks '" << needle << "'";
    return testing::AssertionSuccess();
}
constexpr StatusCode kInvalid = StatusCode::invalid_argument;

RmsNormParams good_rms(float* x, float* y, float* w) {
    RmsNormParams p;
    p.x = x;
    p.y = y;
    p.weight = w;
    p.n_tokens = 2;
    p.n_heads = 2;
    p.dim = 8;
    p.x_token_stride = p.y_token_stride = 16;
    p.x_head_stride = p.y_head_stride = 8;
    return p;
}

TEST(Validate, RmsNorm) {
    std::vector<float> x(64), y(64), w(8);
    EXPECT_TRUE(validate(good_rms(x.data(), y.data(), w.data())).is_ok());
    auto p = good_rms(x.data(), y.data(), w.data());
    p.dim = 0;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "dim = 0"));
    p = good_rms(x.data(), y.data(), w.data());
    p.x = nullptr;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "x is null"));
    p = good_rms(x.data(), y.data(), nullptr);
    EXPECT_TRUE(rejected(validate(p), kInvalid, "weight is null"));
    p = good_rms(x.data(), y.data(), w.data());
    p.weight_mode = RmsNormWeight::none;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "weight given"));
    p = good_rms(x.data(), y.data(), w.data());
    p.y_head_stride = 7;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "y_head_stride = 7 < dim 8"));
    p = good_rms(x.data(), y.data(), w.data());
    p.y_token_stride = 15;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "y_token_stride = 15"));
    p = good_rms(x.data(), y.data(), w.data());
    p.x_head_stride = -8;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "x_head_stride = -8"));
    p = good_rms(x.data(), y.data(), w.data());
    p.x_type = DType::i32;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "x_type = i32"));
    p = good_rms(x.data(), y.data(), w.data());
    p.eps = -1.0f;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "eps"));
    p = good_rms(x.data(), x.data() + 4, w.data());  // partial overlap
    EXPECT_TRUE(rejected(validate(p), kInvalid, "overlap"));
    p = good_rms(x.data(), x.data(), w.data());      // in place: fine
    EXPECT_TRUE(validate(p).is_ok());
    p.y_type = DType::bf16;                           // same pointer, other dtype: not in place
    EXPECT_TRUE(rejected(validate(p), kInvalid, "overlap"));
    p = good_rms(x.data(), y.data(), w.data());
    p.x_token_stride = int64_t{1} << 62;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "overflows"));
    // the backends pass the same Status through
    auto ref = ref_backend();
    p = good_rms(x.data(), y.data(), w.data());
    p.dim = -3;
    EXPECT_TRUE(rejected(ref->rms_norm(p), kInvalid, "dim = -3"));
    for (auto& nb : backends_under_test()) EXPECT_TRUE(rejected(nb.backend->rms_norm(p), kInvalid, "dim = -3")) << nb.spec;
}

TEST(Validate, LayerNormAndHadamard) {
    std::vector<float> x(64), y(64);
    LayerNormParams ln;
    ln.x = x.data();
    ln.y = y.data();
    ln.n_tokens = 4;
    ln.dim = 16;
    ln.x_token_stride = ln.y_token_stride = 16;
    EXPECT_TRUE(validate(ln).is_ok());
    ln.eps = std::numeric_limits<float>::infinity();
    EXPECT_TRUE(rejected(validate(ln), kInvalid, "eps"));
    HadamardParams h;
    h.x = x.data();
    h.y = y.data();
    h.n_tokens = 2;
    h.dim = 32;
    h.x_token_stride = h.y_token_stride = 32;
    EXPECT_TRUE(validate(h).is_ok());
    h.dim = 24;
    EXPECT_TRUE(rejected(validate(h), kInvalid, "dim = 24, expected a power of two"));
    h.dim = kHadamardMaxDim * 2;
    EXPECT_TRUE(rejected(validate(h), kInvalid, "power of two"));
    for (auto& nb : backends_under_test()) EXPECT_TRUE(rejected(nb.backend->hadamard(h), kInvalid, "power of two"));
}

RopeParams good_rope(float* x, float* y, const int64_t* pos, const float* f) {
    RopeParams p;
    p.x = x;
    p.y = y;
    p.positions = pos;
    p.inv_freq = f;
    p.n_tokens = 2;
    p.n_heads = 1;
    p.head_dim = 16;
    p.rot_dim = 8;
    p.x_token_stride = p.y_token_stride = 16;
    p.x_head_stride = p.y_head_stride = 16;
    return p;
}

TEST(Validate, Rope) {
    std::vector<float> x(32), y(32), f(4);
    const int64_t pos[2] = {0, 1};
    EXPECT_TRUE(validate(good_rope(x.data(), y.data(), pos, f.data())).is_ok());
    auto p = good_rope(x.data(), y.data(), pos, f.data());
    p.rot_dim = 7;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "rot_dim = 7"));
    p.rot_dim = 18;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "≤ head_dim 16"));
    p = good_rope(x.data(), y.data(), nullptr, f.data());
    EXPECT_TRUE(rejected(validate(p), kInvalid, "positions is null"));
    p = good_rope(x.data(), y.data(), pos, nullptr);
    EXPECT_TRUE(rejected(validate(p), kInvalid, "inv_freq is null"));
    p = good_rope(x.data(), y.data(), pos, f.data());
    p.positions_type = DType::f32;
    EXPECT_TRUE(rejected(validate(p), kInvalid, "positions_type = f32"));
    p = good_rope(x.data(), y.data(), pos, f.data());
    p.pairing = static_cast<RopePairing>(7);
    EXPECT_TRUE(rejected(validate(p), kInvalid, "pairing = 7"));
    p = good_rope(x.data(), y.data(), pos, f.data());
    p.attention_factor = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(rejected(validate(p), kInvalid, "attention_factor"));
    RopeFrequencyConfig fc;
    fc.rot_dim = 5;
    EXPECT_TRUE(rejected(rope_inv_freq(fc, f.data()), kInvalid, "rot_dim = 5"));
    fc.rot_dim = 8;
    fc.base = 1.0;
    EXPECT_TRUE(rejected(rope_inv_freq(fc, f.data()), kInvalid, "base = 1"));
    fc.base = 10000;
    fc.yarn = true;
    fc.yarn_params.original_max_position = 0;
    EXPECT_TRUE(rejected(rope_inv_freq(fc, f.data()), kInvalid, "original_max_position = 0"));
}

TEST(Validate, QuantFp8) {
    std::vector<float> x(256), sf(8), dq(256);
    std::vector<uint8_t> q(256), sb(8);
    QuantFp8Params p;
    p.x = x.data();
    p.q = q.data();
    p.scale_ue8m0 = sb.data();
    p.n_tokens = 2;
    p.dim = 128;
    p.group_size = 64;
    p.x_token_stride = p.q_token_stride = 128;
    p.scale_token_stride = 2;
    EXPECT_TRUE(validate(p).is_ok());
    auto bad = p;
    bad.group_size = 48;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "dim 128 is not a multiple of group_size 48"));
    bad = p;
    bad.q = nullptr;
    bad.scale_ue8m0 = nullptr;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "no output"));
    bad = p;
    bad.scale_token_stride = 1;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "scale_ue8m0_token_stride = 1"));
    bad = p;
    bad.q = reinterpret_cast<uint8_t*>(x.data()) + 4;  // q overlapping x
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "overlap"));
    bad = p;
    bad.dequant = x.data();  // in place: x itself, same layout
    bad.dequant_token_stride = p.x_token_stride;
    EXPECT_TRUE(validate(bad).is_ok());
    bad.dequant_token_stride = 64;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "dequant_token_stride"));
}

TEST(Validate, Topk) {
    std::vector<float> s(40);
    std::vector<int32_t> out(12), valid = {3, 11};
    TopkParams p;
    p.scores = s.data();
    p.valid_len = valid.data();
    p.out = out.data();
    p.n_rows = 2;
    p.n_cols = 20;
    p.k = 6;
    p.scores_row_stride = 20;
    p.out_row_stride = 6;
    EXPECT_TRUE(validate(p).is_ok());
    auto bad = p;
    bad.k = 0;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "k = 0"));
    bad = p;
    bad.out_row_stride = 5;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "out_row_stride = 5 < k 6"));
    bad = p;
    valid[1] = 21;
    EXPECT_TRUE(validate(bad).is_ok());  // validate reads no array: the lengths are check_indices'
    EXPECT_TRUE(rejected(check_indices(bad), kInvalid, "valid_len[1] = 21"));
    EXPECT_TRUE(rejected(validate_and_check_indices(bad), kInvalid, "valid_len[1] = 21"));
    valid[1] = -1;
    EXPECT_TRUE(rejected(check_indices(bad), kInvalid, "valid_len[1] = -1"));
    for (auto& nb : host_backends_under_test()) {  // the host backends run check_indices
        const size_t need = nb.backend->topk_workspace_size(p);
        GuardedBuffer ws(std::max<size_t>(need, 1));
        EXPECT_TRUE(rejected(nb.backend->topk(p, {ws.data(), need}), kInvalid, "valid_len[1] = -1")) << nb.spec;
    }
    EXPECT_TRUE(rejected(ref_backend()->topk(p, {}), kInvalid, "valid_len[1] = -1"));
    valid[1] = 11;
    bad = p;
    bad.n_cols = int64_t{1} << 31;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "int32"));
    bad = p;
    bad.out = reinterpret_cast<int32_t*>(s.data()) + 3;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "overlap"));
    // a cpu backend refuses a workspace that is too small
    for (auto& nb : host_backends_under_test()) {
        const size_t need = nb.backend->topk_workspace_size(p);
        ASSERT_GT(need, 0u) << nb.spec;
        GuardedBuffer ws(need);
        EXPECT_TRUE(rejected(nb.backend->topk(p, {ws.data(), need - 1}), kInvalid, "workspace")) << nb.spec;
        EXPECT_TRUE(rejected(nb.backend->topk(p, {static_cast<char*>(ws.data()) + 4, need}), kInvalid, "aligned"))
            << nb.spec;
        EXPECT_TRUE(nb.backend->topk(p, {ws.data(), need}).is_ok()) << nb.spec;
    }
}

TEST(Validate, Linear) {
    std::vector<float> w(64 * 32), x(4 * 32), y(4 * 64), scale(1);
    LinearWeights lw;
    lw.weight = w.data();
    lw.out_features = 64;
    lw.in_features = 32;
    lw.weight_row_stride = 32;
    EXPECT_TRUE(validate(lw).is_ok());
    auto bad = lw;
    bad.weight_row_stride = 31;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "weight_row_stride = 31 < in_features 32"));
    bad = lw;
    bad.weight_type = DType::f8_e4m3;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "needs block_scale [1, 1]"));
    bad = lw;
    bad.block_scale = scale.data();
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "block_scale given for a f32 weight"));
    bad = lw;
    bad.weight_type = DType::i8;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "weight_type = i8"));
    bad = lw;
    bad.out_features = 0;
    EXPECT_TRUE(rejected(validate(bad), kInvalid, "out_features = 0"));
    auto grouped = lw;  // ops/linear.h "Groups"
    grouped.groups = 0;
    EXPECT_TRUE(rejected(validate(grouped), kInvalid, "groups = 0"));
    grouped.groups = 3;
    EXPECT_TRUE(rejected(validate(grouped), kInvalid, "out_features 64 is not a multiple of groups 3"));
    grouped.groups = 2;
    EXPECT_TRUE(validate(grouped).is_ok());
    grouped.weight_type = DType::f8_e4m3;  // groups of 32 rows inside one 128-row scale block
    grouped.block_scale = scale.data();
    EXPECT_TRUE(rejected(validate(grouped), kInvalid, "each group must be whole 128-row scale blocks"));

    LinearParams p;
    p.x = x.data();
    p.y = y.data();
    p.n_tokens = 4;
    p.x_row_stride = 32;
    p.y_row_stride = 64;
    EXPECT_TRUE(validate(p, 32, 64).is_ok());
    auto bp = p;
    bp.y_row_stride = 60;
    EXPECT_TRUE(rejected(validate(bp, 32, 64), kInvalid, "y_row_stride = 60 < out_features 64"));
    bp = p;
    bp.y = x.data() + 8;
    EXPECT_TRUE(rejected(validate(bp, 32, 64), kInvalid, "overlap"));

    // every backend: prepare rejects bad weights; the plan must match the run; workspace checked;
    // weights prepared by another backend are refused.
    auto ref = ref_backend();
    auto ref_prepared = ref->linear_prepare(lw);
    ASSERT_TRUE(ref_prepared.has_value());
    for (auto& nb : host_backends_under_test()) {
        SCOPED_TRACE(nb.spec);
        Backend& b = *nb.backend;
        EXPECT_TRUE(rejected(b.linear_prepare(bad).status(), kInvalid, "out_features = 0"));
        auto prepared = b.linear_prepare(lw);
        ASSERT_TRUE(prepared.has_value()) << prepared.status().to_string();
        auto plan = b.linear_plan(**prepared, p);
        ASSERT_TRUE(plan.has_value()) << plan.status().to_string();
        GuardedBuffer ws(std::max<size_t>(plan->workspace_bytes, 64));
        auto other = p;
        other.n_tokens = 3;
        EXPECT_TRUE(rejected(b.linear(**prepared, *plan, other, {ws.data(), plan->workspace_bytes}), kInvalid,
                             "differ from the plan"));
        if (plan->workspace_bytes > 0) {
            EXPECT_TRUE(rejected(b.linear(**prepared, *plan, p, {ws.data(), plan->workspace_bytes - 1}), kInvalid,
                                 "workspace"));
        }
        EXPECT_TRUE(rejected(b.linear(**ref_prepared, *plan, p, {ws.data(), plan->workspace_bytes}), kInvalid,
                             "prepared by another backend"));
        EXPECT_TRUE(b.linear(**prepared, *plan, p, {ws.data(), plan->workspace_bytes}).is_ok());
        // zero tokens: a valid no-op that writes nothing
        GuardedBuffer y0(64);
        LinearParams empty = p;
        empty.n_tokens = 0;
        empty.y = y0.data();
        auto plan0 = b.linear_plan(**prepared, empty);
        ASSERT_TRUE(plan0.has_value()) << plan0.status().to_string();
        EXPECT_TRUE(b.linear(**prepared, *plan0, empty, {ws.data(), plan0->workspace_bytes}).is_ok());
        EXPECT_TRUE(untouched_outside_rows(y0, 0, 1, 0, 0, 0, 1, "linear y with 0 tokens"));
    }
}

}  // namespace
}  // namespace sieve::test

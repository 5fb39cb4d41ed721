// Top-k reuse across draft steps (skip_topk, qsa.md §7) on each family's MTP layer, the draft model run by
// its own stepper (LayerStepper::reuse_selections): a later draft token attends with the selections its
// layer made at draft step 0 while every side cache is updated as if it had selected anew; rollback undoes
// whole draft rounds. DeepSeek-V4's MTP layer is sliding-window only (nothing to reuse): its CSA layer
// is run as the draft layer too, so that V4's compressor and indexer state are covered. The backend is cpu,
// or the spec in SIEVE_TEST_BACKEND (e.g. cuda, on a machine with a GPU).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "model_test_util.h"
#include "models/deepseek_v4/model.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/engine.h"
#include "sieve/runtime/layer_stepper.h"

namespace sieve {
namespace {

using model_test::Golden;

std::unique_ptr<Backend> backend() {
    const char* spec = std::getenv("SIEVE_TEST_BACKEND");
    return model_test::test_backend(spec != nullptr && *spec != '\0' ? spec : "cpu");
}

struct Case {
    std::string fixture;  // under tests/data
    int64_t layer;        // the draft layer
    bool selects;         // whether it selects with an indexer
};
const Case kCases[] = {
    {"mtp/deepseek_v4", 3, false},
    {"mtp/deepseek_v4", 1, true},  // a CSA layer in the draft role
    {"mtp/deepseek_v32", 2, true},
    {"mtp/hy_v4", 4, true},
    {"mtp/qwen4_exp", 4, true},
};

// Records every token's selection; with `force`, replaces the rows of the positions it holds.
struct Recorder : SelectionObserver {
    std::map<int64_t, std::vector<int32_t>> rows;   // position → row without trailing −1s
    std::map<int64_t, std::vector<int32_t>> force;  // position → the row to attend with
    void on_selection(int64_t, RequestId, int64_t position, std::span<int32_t> selected, std::span<const float>,
                      int64_t) override {
        if (auto f = force.find(position); f != force.end()) {
            ASSERT_LE(f->second.size(), selected.size());
            std::fill(std::copy(f->second.begin(), f->second.end(), selected.begin()), selected.end(), -1);
        }
        rows[position].assign(selected.begin(), std::find(selected.begin(), selected.end(), -1));
    }
};

// Every cache row request 1 holds for its first `tokens` positions: (group, layer slot, entry) → bytes, read
// from a host copy of each layer's storage (the caches may live where the host cannot read them).
using CacheRows = std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<uint8_t>>;
CacheRows cache_rows(const LayerStepper& stepper, int64_t tokens) {
    Backend& backend = stepper.model().backend();
    CacheRows out;
    for (const auto& group : stepper.caches().groups())
        for (int64_t layer = 0; layer < group->n_layers(); ++layer) {
            const CacheView view = group->view(layer);
            const size_t bytes = static_cast<size_t>(group->allocator().total_blocks() * view.block_bytes);
            auto storage = backend.buffer_wrap(view.base, bytes, BufferUsage::cache, "a cache layer's storage");
            EXPECT_TRUE(storage.has_value()) << storage.status().to_string();
            if (!storage.has_value()) return out;
            std::vector<uint8_t> host(bytes);
            const Status s = backend.buffer_download(**storage, 0, host.data(), bytes);
            EXPECT_TRUE(s.is_ok()) << s.to_string();
            for (int64_t e = 0; e < group->entries_for_tokens(tokens); ++e) {
                const int64_t slot = group->slot(1, e);
                if (slot < 0) continue;  // released: no later token sees it
                const size_t at = static_cast<size_t>(view.row(slot) - view.base);
                out[{group->name(), layer, e}].assign(host.begin() + static_cast<std::ptrdiff_t>(at),
                                                      host.begin() + static_cast<std::ptrdiff_t>(at + view.entry_bytes));
            }
        }
    return out;
}

// The rows `fewer` holds, `more` holds too, with the same bytes (a stepper that reuses keeps the windowed
// rows a rollback to its draft round's start needs, so it may hold more).
void expect_same_rows(const CacheRows& more, const CacheRows& fewer, int64_t position) {
    EXPECT_FALSE(fewer.empty());
    for (const auto& [key, bytes] : fewer) {
        const auto it = more.find(key);
        ASSERT_NE(it, more.end()) << "position " << position << ": " << std::get<0>(key) << " entry " << std::get<2>(key);
        EXPECT_TRUE(it->second == bytes) << "position " << position << ": " << std::get<0>(key) << " entry "
                                         << std::get<2>(key);
    }
}

class DraftReuse : public ::testing::TestWithParam<std::tuple<Case, NumericsProfile>> {
protected:
    void SetUp() override {
        golden_ = model_test::load_golden(c().fixture);
        backend_ = backend();
        for (size_t i = 0; i < golden_.fixture.layers.size(); ++i)
            if (golden_.fixture.layers[i] == c().layer) layer_pos_ = static_cast<int64_t>(i);
        ASSERT_GE(layer_pos_, 0);
        const std::vector<int64_t> n = golden_.n_tokens();
        request_ = std::max_element(n.begin(), n.end()) - n.begin();
        n_ = n[static_cast<size_t>(request_)];
    }
    const Case& c() const { return std::get<0>(GetParam()); }
    // The draft model: the case's layer alone. DeepSeek-V4 with one row per window and state block, so
    // that a row released too early (before a rollback to the draft round's start) is missing.
    std::unique_ptr<AttentionModel> model() {
        Expected<std::unique_ptr<AttentionModel>> m = unsupported_error("not loaded");
        if (const DeepseekV4Config* v4 = golden_.config.deepseek_v4()) {
            DeepseekV4Options o;
            o.backend = backend_.get();
            o.profile = std::get<1>(GetParam());
            o.layers = {c().layer};
            o.swa_block_size = 1;
            o.state_block_size = 1;
            m = load_deepseek_v4_model(*v4, *golden_.checkpoint, o);
        } else {
            ModelOptions o;
            o.backend = backend_.get();
            o.profile = std::get<1>(GetParam());
            o.layers = {c().layer};
            m = load_attention_model(golden_.config, *golden_.checkpoint, o);
        }
        EXPECT_TRUE(m.has_value()) << m.status().to_string();
        if (!m.has_value()) return nullptr;
        hidden_ = (*m)->hidden_size();
        return std::move(m).value();
    }
    // The captured input rows of positions [p, p + count).
    std::vector<float> inputs(int64_t p, int64_t count) const {
        const auto in = golden_.input(request_, layer_pos_);
        return {in.begin() + p * hidden_, in.begin() + (p + count) * hidden_};
    }
    // One step of request 1 over [start, start + rows / hidden) through `s`; its outputs.
    std::vector<float> step(LayerStepper& s, int64_t start, const std::vector<float>& rows, bool reuse = false) {
        const int64_t count = static_cast<int64_t>(rows.size()) / hidden_;
        std::vector<float> out(rows.size(), NAN);
        StepRequest r{1, start, count};
        r.reuse_selection = reuse;
        Status st = s.begin_step({r});
        if (st.is_ok()) st = s.forward(0, rows.data(), out.data());
        if (st.is_ok()) st = s.end_step();
        EXPECT_TRUE(st.is_ok()) << "position " << start << ": " << st.to_string();
        return out;
    }
    Golden golden_;
    std::unique_ptr<Backend> backend_;
    int64_t layer_pos_ = -1, request_ = 0, n_ = 0, hidden_ = 0;
};

// A prefill (draft step 0), then draft tokens one by one. Three draft models side by side: A reuses (the
// stepper's selection reuse), B selects anew, C selects anew but attends with the row step 0 chose for its
// last token (forced by the test's own observer). After every draft token all three hold the same cache
// bytes (the side caches are updated either way); A's outputs are C's, bit for bit, and B's wherever B
// selected what step 0 did; and reuse shows: some draft token's own selection differs from step 0's.
TEST_P(DraftReuse, ReuseAttendsWithStepZerosSelectionAndUpdatesEveryCache) {
    auto ma = model(), mb = model(), mc = model();
    ASSERT_TRUE(ma && mb && mc);
    Recorder rb, rc;
    mb->set_selection_observer(&rb);
    mc->set_selection_observer(&rc);
    int64_t agreeing = 0, differing = 0;
    for (int64_t P : {n_ / 3, n_ / 2, 2 * n_ / 3}) {
        SCOPED_TRACE(fmt::format("step 0 over positions 0 … {}", P - 1));
        rb.rows.clear();
        rc.rows.clear();
        rc.force.clear();
        auto a = LayerStepper::create(*ma, CachePoolOptions{});
        auto b = LayerStepper::create(*mb, CachePoolOptions{});
        auto cc = LayerStepper::create(*mc, CachePoolOptions{});
        ASSERT_TRUE(a.has_value() && b.has_value() && cc.has_value());
        ASSERT_TRUE((*a)->reuse_selections().is_ok());
        const std::vector<float> prefill = inputs(0, P);
        const std::vector<float> oa = step(**a, 0, prefill), ob = step(**b, 0, prefill), oc = step(**cc, 0, prefill);
        EXPECT_EQ(oa, ob);
        EXPECT_EQ(oa, oc);
        const std::vector<int32_t> kept = rb.rows[P - 1];
        EXPECT_EQ(kept.empty(), !c().selects);
        for (int64_t p = P; p < std::min<int64_t>(P + 4, n_); ++p) {
            rc.force[p] = kept;
            const std::vector<float> in = inputs(p, 1);
            const std::vector<float> da = step(**a, p, in, true), db = step(**b, p, in), dc = step(**cc, p, in);
            EXPECT_EQ(da, dc) << "position " << p;
            const CacheRows rows = cache_rows(**a, p + 1);
            expect_same_rows(rows, cache_rows(**b, p + 1), p);
            expect_same_rows(rows, cache_rows(**cc, p + 1), p);
            if (rb.rows[p] == kept) {
                ++agreeing;
                EXPECT_EQ(da, db) << "position " << p << ": the same selection";
            } else {
                ++differing;
            }
        }
    }
    mb->set_selection_observer(nullptr);
    mc->set_selection_observer(nullptr);
    if (c().selects) {
        EXPECT_GT(differing, 0) << "no draft token selected differently from step 0: the test shows nothing";
    } else {
        EXPECT_EQ(differing, 0);
        EXPECT_GT(agreeing, 0);
    }
}

// Draft rounds: a draft step 0 over the round's tokens, then one to three draft tokens that reuse its
// selections, then a rollback to a random point of step 0 (the drafts and the rest of step 0 undone). The same
// rounds without their draft tokens (step 0, then a rollback within it) hold the same cache bytes and give the
// same outputs, which match the reference.
TEST_P(DraftReuse, RollbackUndoesWholeDraftRounds) {
    auto ma = model(), mc = model();
    ASSERT_TRUE(ma && mc);
    auto a = LayerStepper::create(*ma, CachePoolOptions{});
    auto cc = LayerStepper::create(*mc, CachePoolOptions{});
    ASSERT_TRUE(a.has_value() && cc.has_value());
    ASSERT_TRUE((*a)->reuse_selections().is_ok());
    std::mt19937_64 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> out_a(static_cast<size_t>(n_ * hidden_), NAN), out_c = out_a;
    int64_t undone = 0;
    for (int64_t done = 0; done < n_;) {
        const int64_t count =
            done == 0 ? std::min<int64_t>(6, n_) : std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(3, n_ - done))(rng);
        const int64_t keep = std::uniform_int_distribution<int64_t>(done + 1, done + count)(rng);
        const std::vector<float> in = inputs(done, count);
        const std::vector<float> oa = step(**a, done, in), oc = step(**cc, done, in);
        std::copy(oa.begin(), oa.begin() + (keep - done) * hidden_, out_a.begin() + done * hidden_);
        std::copy(oc.begin(), oc.begin() + (keep - done) * hidden_, out_c.begin() + done * hidden_);
        const int64_t drafts = std::uniform_int_distribution<int64_t>(1, 3)(rng);
        for (int64_t d = 0; d < drafts; ++d) {
            std::vector<float> row(static_cast<size_t>(hidden_));
            for (float& v : row) v = normal(rng);
            step(**a, done + count + d, row, true);
        }
        undone += drafts + done + count - keep;
        Status s = (*a)->rollback(1, keep);
        EXPECT_TRUE(s.is_ok()) << s.to_string();
        if (keep < done + count) {
            s = (*cc)->rollback(1, keep);
            EXPECT_TRUE(s.is_ok()) << s.to_string();
        }
        ASSERT_FALSE(::testing::Test::HasFailure());
        done = keep;
    }
    EXPECT_GT(undone, 0);
    EXPECT_EQ(out_a, out_c);
    // Cache rows are compared in the exact profile, whose entries are plain rows: the deployed formats split a
    // block into its entries' data and their scales (fp8_row_scale, deepseek_v4.md §4.3), so a row view there
    // also covers bytes of later positions, which A's last draft tokens wrote and C's never did.
    if (std::get<1>(GetParam()) == NumericsProfile::exact) {
        const CacheRows rows = cache_rows(**a, n_), rows_c = cache_rows(**cc, n_);
        EXPECT_EQ(rows.size(), rows_c.size());
        expect_same_rows(rows, rows_c, n_);
        const auto ref = golden_.output(request_, layer_pos_);
        double diff = 0, norm = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            diff += (out_a[i] - ref[i]) * (out_a[i] - ref[i]);
            norm += ref[i] * ref[i];
        }
        EXPECT_LE(std::sqrt(diff / norm), 1e-4);
    }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, NumericsProfile>>& info) {
    const Case& c = std::get<0>(info.param);
    std::string name = fmt::format("{}_layer{}_{}", c.fixture.substr(4), c.layer, numerics_profile_name(std::get<1>(info.param)));
    return name;
}

INSTANTIATE_TEST_SUITE_P(MtpFixtures, DraftReuse,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(NumericsProfile::exact, NumericsProfile::deployed)),
                         case_name);

// The Engine's speculative decoding with the MTP layer as its draft model (EngineOptions::draft_model): the
// main layers give, bit for bit, the outputs of the same steps without a draft model (which match the
// reference); the draft model ran step 0 and reusing steps for the drafts, and freed every request.
TEST(DraftModelEngine, DraftsRunOnTheMtpLayerAndLeaveTheTargetAsItWas) {
    const Golden g = model_test::load_golden("mtp/hy_v4");
    auto backend = sieve::backend();
    ModelOptions target_options, draft_options;
    target_options.backend = draft_options.backend = backend.get();
    target_options.layers = {0, 1, 2, 3};
    draft_options.layers = {4};
    auto target = load_attention_model(g.config, *g.checkpoint, target_options);
    auto draft = load_attention_model(g.config, *g.checkpoint, draft_options);
    ASSERT_TRUE(target.has_value() && draft.has_value());
    struct GoldenIo final : RequestIo {
        const Golden& g;
        int64_t request, hidden;
        std::vector<std::vector<float>> out;  // [layer_pos] rows
        GoldenIo(const Golden& golden, int64_t r, int64_t h, size_t layers, int64_t n)
            : g(golden), request(r), hidden(h), out(layers, std::vector<float>(static_cast<size_t>(n * h), NAN)) {}
        void input(int64_t layer_pos, int64_t position, float* row) override {
            const auto in = g.input(request, layer_pos);
            std::copy(in.begin() + position * hidden, in.begin() + (position + 1) * hidden, row);
        }
        void output(int64_t layer_pos, int64_t position, const float* row) override {
            std::copy(row, row + hidden, out[static_cast<size_t>(layer_pos)].begin() + position * hidden);
        }
    };
    auto run = [&](AttentionModel* draft_model, EngineStats* stats) {
        EngineOptions o;
        o.scheduler.max_tokens_per_step = 32;
        o.scheduler.draft_tokens = 3;
        std::mt19937_64 rng(3);
        o.accepted_drafts = [rng](RequestId, int64_t, int64_t drafts) mutable {
            return std::uniform_int_distribution<int64_t>(0, drafts)(rng);
        };
        o.draft_model = draft_model;
        auto engine = Engine::create(**target, o);
        EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
        std::vector<std::unique_ptr<GoldenIo>> ios;
        for (int64_t r = 0; r < g.n_requests(); ++r) {
            const int64_t n = g.n_tokens()[static_cast<size_t>(r)];
            ios.push_back(std::make_unique<GoldenIo>(g, r, (*target)->hidden_size(), 4, n));
            EXPECT_TRUE((*engine)->add_request(r, n, std::min<int64_t>(n, 5), ios.back().get()).is_ok());
        }
        const Status s = (*engine)->run();
        EXPECT_TRUE(s.is_ok()) << s.to_string();
        *stats = (*engine)->stats();
        std::vector<std::vector<std::vector<float>>> out;
        for (const auto& io : ios) out.push_back(io->out);
        return out;
    };
    EngineStats with, without;
    const auto a = run(draft->get(), &with), b = run(nullptr, &without);
    EXPECT_EQ(a, b);
    for (int64_t r = 0; r < g.n_requests(); ++r)
        for (int64_t l = 0; l < 4; ++l) {
            const auto ref = g.output(r, l);
            const std::vector<float>& got = a[static_cast<size_t>(r)][static_cast<size_t>(l)];
            double diff = 0, norm = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                diff += (got[i] - ref[i]) * (got[i] - ref[i]);
                norm += ref[i] * ref[i];
            }
            EXPECT_LE(std::sqrt(diff / norm), 1e-4) << "request " << r << " layer " << l;
        }
    EXPECT_EQ(with.drafted_tokens, without.drafted_tokens);
    EXPECT_GT(with.draft_steps, 0);
    EXPECT_GT(with.draft_reused_tokens, 0);
    EXPECT_GT(with.draft_model_tokens, with.draft_reused_tokens);
    EXPECT_EQ(without.draft_steps, 0);
    EXPECT_GT(with.draft_seconds, 0.0);

    EngineOptions no_drafts;
    no_drafts.draft_model = draft->get();
    EXPECT_NE(Engine::create(**target, no_drafts).status().message().find("a draft model without draft tokens"),
              std::string::npos);
}

// Misuse is an error naming it: reuse on a stepper that keeps no selections, with two tokens, before any step
// selected, and after a rollback past the token whose selections it would reuse.
TEST(DraftReuseMisuse, ErrorsNameTheRule) {
    const Golden g = model_test::load_golden("mtp/deepseek_v32");
    auto backend = sieve::backend();
    ModelOptions o;
    o.backend = backend.get();
    o.layers = {2};
    auto model = load_attention_model(g.config, *g.checkpoint, o);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    auto s = LayerStepper::create(**model, CachePoolOptions{});
    ASSERT_TRUE(s.has_value());
    StepRequest reuse{1, 0, 1};
    reuse.reuse_selection = true;
    EXPECT_NE((*s)->begin_step({reuse}).message().find("call reuse_selections first"), std::string::npos);
    ASSERT_TRUE((*s)->reuse_selections().is_ok());
    EXPECT_NE((*s)->begin_step({reuse}).message().find("no step that selected"), std::string::npos);
    const int64_t hidden = (*model)->hidden_size();
    std::vector<float> in(static_cast<size_t>(4 * hidden), 0.5f), out(in.size());
    ASSERT_TRUE((*s)->begin_step({{1, 0, 4}}).is_ok());
    ASSERT_TRUE((*s)->forward(0, in.data(), out.data()).is_ok());
    ASSERT_TRUE((*s)->end_step().is_ok());
    StepRequest two{1, 4, 2};
    two.reuse_selection = true;
    EXPECT_NE((*s)->begin_step({two}).message().find("with 2 tokens"), std::string::npos);
    reuse.start = 4;
    ASSERT_TRUE((*s)->begin_step({reuse}).is_ok());
    ASSERT_TRUE((*s)->forward(0, in.data(), out.data()).is_ok());
    ASSERT_TRUE((*s)->end_step().is_ok());
    // The floor is draft step 0's start: rolling back to 2 is allowed, and drops the selections of position 3.
    EXPECT_NE((*s)->rollback(1, -1).message().find("its last step that selected anew started at 0"), std::string::npos);
    ASSERT_TRUE((*s)->rollback(1, 2).is_ok());
    reuse.start = 2;
    EXPECT_NE((*s)->begin_step({reuse}).message().find("no step that selected"), std::string::npos);
}

}  // namespace
}  // namespace sieve

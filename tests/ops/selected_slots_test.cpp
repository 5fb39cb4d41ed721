// Conformance of selected_slots (ops/selected_slots.h): hand-computed slots on every backend, random
// selections against an independent restatement of the formula (itself checked against ref), and the
// check_indices refusals. Inputs live in GuardedBuffers, so the device variants run every case too.
#include <vector>

#include "harness.h"
#include "sieve/ops/selected_slots.h"

namespace sieve::test {
namespace {

// The step's arrays in guarded memory; slots start poisoned.
struct SlotsCase {
    int64_t n_tokens = 0, width = 0, ratio = 1, block_size = 1, n_requests = 1, table_stride = 1, n_slots = 0;
    int64_t selected_stride = 0, slots_stride = 0;
    bool with_selected = true, with_n_scored = false;
    std::vector<int32_t> selected, n_scored, token_request, table;
    std::vector<int64_t> positions;
};

struct SlotsRun {
    GuardedBuffer selected, n_scored, positions, token_request, table, slots;
    explicit SlotsRun(const SlotsCase& c)
        : selected(std::max<size_t>(4, c.selected.size() * 4)),
          n_scored(std::max<size_t>(4, c.n_scored.size() * 4)),
          positions(std::max<size_t>(8, c.positions.size() * 8)),
          token_request(std::max<size_t>(4, c.token_request.size() * 4)),
          table(std::max<size_t>(4, c.table.size() * 4)),
          slots(std::max<size_t>(4, static_cast<size_t>(c.n_tokens * c.slots_stride) * 4)) {
        std::copy(c.selected.begin(), c.selected.end(), selected.as<int32_t>());
        std::copy(c.n_scored.begin(), c.n_scored.end(), n_scored.as<int32_t>());
        std::copy(c.positions.begin(), c.positions.end(), positions.as<int64_t>());
        std::copy(c.token_request.begin(), c.token_request.end(), token_request.as<int32_t>());
        std::copy(c.table.begin(), c.table.end(), table.as<int32_t>());
    }
    SelectedSlotsParams params(const SlotsCase& c) {
        SelectedSlotsParams p;
        p.selected = c.with_selected ? selected.as<int32_t>() : nullptr;
        p.n_scored = c.with_n_scored ? n_scored.as<int32_t>() : nullptr;
        p.positions = positions.as<int64_t>();
        p.tables = {table.as<int32_t>(), token_request.as<int32_t>(), c.n_requests, c.table_stride};
        p.slots = slots.as<int32_t>();
        p.n_tokens = c.n_tokens;
        p.width = c.width;
        p.ratio = c.ratio;
        p.block_size = c.block_size;
        p.n_slots = c.n_slots;
        p.selected_row_stride = c.selected_stride;
        p.slots_row_stride = c.slots_stride;
        return p;
    }
    std::vector<int32_t> rows(const SlotsCase& c) const {
        std::vector<int32_t> out;
        for (int64_t t = 0; t < c.n_tokens; ++t)
            for (int64_t j = 0; j < c.width; ++j) out.push_back(slots.as<int32_t>()[t * c.slots_stride + j]);
        return out;
    }
};

// Two requests, blocks of 2 entries: request 0's table [3, 0, 5], request 1's [1, -1, 4] (its second
// block released). Ratio 4: position p sees ⌊(p + 1)/4⌋ entries.
SlotsCase known_case() {
    SlotsCase c;
    c.n_tokens = 3, c.width = 4, c.ratio = 4, c.block_size = 2, c.n_requests = 2, c.table_stride = 3, c.n_slots = 12;
    c.selected_stride = 5, c.slots_stride = 6;
    c.table = {3, 0, 5, 1, -1, 4};
    c.token_request = {0, 1, 0};
    c.positions = {19, 23, 7};  // 5, 6 and 2 visible entries
    c.selected = {4, 0, -1, 2, 9,   // entry 2 of request 0: block 0·… → table[1] = 0 → slot 0
                  5, 1, 0, 6, 9,    // 6 is not visible yet (6 entries: 0 … 5)
                  1, 3, 0, -1, 9};  // 3 is past the 2 visible entries
    return c;
}

TEST(SelectedSlots, KnownValues) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    for (auto& [name, b] : ref_and(*ref, backends)) {
        SCOPED_TRACE(name);
        SlotsCase c = known_case();
        SlotsRun run(c);
        ASSERT_TRUE(b->selected_slots(run.params(c)).is_ok());
        // slot of entry e = table[e / 2]·2 + e % 2
        EXPECT_EQ(run.rows(c), (std::vector<int32_t>{10, 6, -1, 0,   // 4 → 5·2, 0 → 3·2, 2 → 0·2
                                                     9, 3, 2, -1,    // 5 → 4·2+1, 1 → 1·2+1, 0 → 1·2
                                                     7, -1, 6, -1}));
        EXPECT_TRUE(untouched_outside_rows(run.slots, c.n_tokens, 1, c.width, c.slots_stride, 0, 4, "slots"));
        EXPECT_TRUE(run.slots.guards_intact("slots"));

        // Every visible entry: no selection at all, or a row the indexer did not score.
        SlotsCase every = c;
        every.with_selected = false;
        every.table[4] = 2;  // token 1 reads its entries 0 … 3, block 1 included
        SlotsRun all(every);
        ASSERT_TRUE(b->selected_slots(all.params(every)).is_ok());
        EXPECT_EQ(all.rows(every), (std::vector<int32_t>{6, 7, 0, 1, 2, 3, 4, 5, 6, 7, -1, -1}));
    }
}

TEST(SelectedSlots, ScoredAndUnscoredRowsMix) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    for (auto& [name, b] : ref_and(*ref, backends)) {
        SCOPED_TRACE(name);
        SlotsCase c = known_case();
        c.positions = {19, 3, 7};  // token 1 sees one entry
        c.with_n_scored = true;
        c.n_scored = {5, 0, 2};  // token 1 was not scored: every visible entry
        SlotsRun run(c);
        ASSERT_TRUE(b->selected_slots(run.params(c)).is_ok());
        EXPECT_EQ(run.rows(c), (std::vector<int32_t>{10, 6, -1, 0, 2, -1, -1, -1, 7, -1, 6, -1}));
    }
}

// Random steps: requests with shuffled block tables, selections mixing visible, non-causal and −1
// entries, rows scored or not; every backend against the formula restated here.
TEST(SelectedSlots, RandomStepsMatchTheFormula) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(20261201);
    for (int round = 0; round < 40; ++round) {
        SlotsCase c;
        c.ratio = rng.pick(std::vector<int64_t>{1, 4, 128});
        c.block_size = rng.pick(std::vector<int64_t>{1, 3, 64});
        c.n_requests = rng.integer(1, 4);
        c.width = rng.integer(0, 70);
        c.n_tokens = rng.integer(0, 9);
        c.selected_stride = c.width + rng.integer(0, 3);
        c.slots_stride = c.width + rng.integer(0, 3);
        c.with_selected = rng.coin(0.8);
        c.with_n_scored = rng.coin(0.5);
        const int64_t max_pos = rng.integer(0, 300) * c.ratio / 4 + c.ratio;
        c.table_stride = (max_pos + 1) / c.ratio / c.block_size + 1;
        const int64_t n_blocks = c.n_requests * c.table_stride;
        c.n_slots = n_blocks * c.block_size;
        std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
        for (int64_t i = 0; i < n_blocks; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
        std::shuffle(ids.begin(), ids.end(), rng.engine());
        c.table = ids;
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            c.token_request.push_back(static_cast<int32_t>(rng.integer(0, c.n_requests - 1)));
            c.positions.push_back(rng.integer(0, max_pos));
            c.n_scored.push_back(static_cast<int32_t>(rng.integer(0, 1) * rng.integer(1, 50)));
            for (int64_t j = 0; j < c.selected_stride; ++j)
                c.selected.push_back(static_cast<int32_t>(rng.integer(-2, (max_pos + 1) / c.ratio + 2)));
        }
        std::vector<int32_t> want;
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            const int64_t visible = (c.positions[static_cast<size_t>(t)] + 1) / c.ratio;
            const bool every = !c.with_selected || (c.with_n_scored && c.n_scored[static_cast<size_t>(t)] == 0);
            for (int64_t j = 0; j < c.width; ++j) {
                const int64_t e = every ? j : c.selected[static_cast<size_t>(t * c.selected_stride + j)];
                if (e < 0 || e >= visible) {
                    want.push_back(-1);
                    continue;
                }
                const int64_t row = c.token_request[static_cast<size_t>(t)];
                const int64_t block = c.table[static_cast<size_t>(row * c.table_stride + e / c.block_size)];
                want.push_back(static_cast<int32_t>(block * c.block_size + e % c.block_size));
            }
        }
        for (auto& [name, b] : ref_and(*ref, backends)) {
            SCOPED_TRACE(name + " round " + std::to_string(round));
            SlotsRun run(c);
            const Status st = b->selected_slots(run.params(c));
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_EQ(run.rows(c), want);
            EXPECT_TRUE(untouched_outside_rows(run.slots, c.n_tokens, 1, c.width, c.slots_stride, 0, 4, "slots"));
            EXPECT_TRUE(run.slots.guards_intact("slots"));
        }
    }
}

// Every entry a token reads must sit in a resident block of its row; positions, request rows and the
// slot bound are checked; validate catches shapes and aliasing without reading anything.
TEST(SelectedSlots, Refusals) {
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    for (auto& named : ref_and(*ref, backends)) {
        SCOPED_TRACE(named.first);
        Backend* b = named.second;
        auto expect = [&](SlotsCase c, auto&& edit, const std::string& message) {
            SlotsRun run(c);
            SelectedSlotsParams p = run.params(c);
            edit(c, p);
            const Status st = b->selected_slots(p);
            EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
            EXPECT_NE(st.to_string().find(message), std::string::npos) << st.to_string();
        };
        SlotsCase released = known_case();
        released.selected[5 + 3] = 2;  // token 1 selects entry 2: request 1's block 1 is released
        expect(released, [](SlotsCase&, SelectedSlotsParams&) {}, "reads entry 2, whose block 1 is not resident");
        SlotsCase past = known_case();
        past.table_stride = 2, past.n_requests = 3;  // entry 4 of token 0 needs a third block per row
        expect(past, [](SlotsCase&, SelectedSlotsParams&) {}, "reads entry 4, whose block 2 is past the table");
        expect(known_case(), [](SlotsCase&, SelectedSlotsParams& p) { p.n_slots = 10; }, "at slot 10, past the cache's 10 slots");
        SlotsCase negative = known_case();
        negative.positions[2] = -1;
        expect(negative, [](SlotsCase&, SelectedSlotsParams&) {}, "positions[2] = -1");
        SlotsCase bad_row = known_case();
        bad_row.token_request[1] = 2;
        expect(bad_row, [](SlotsCase&, SelectedSlotsParams&) {}, "token_request[1] = 2");
        expect(known_case(), [](SlotsCase&, SelectedSlotsParams& p) { p.slots_row_stride = 3; }, "slots");
        expect(known_case(), [](SlotsCase&, SelectedSlotsParams& p) { p.ratio = 0; }, "ratio = 0");
        expect(known_case(), [](SlotsCase&, SelectedSlotsParams& p) { p.n_slots = int64_t{1} << 32; }, "slots are int32");
        expect(known_case(), [](SlotsCase&, SelectedSlotsParams& p) { p.slots = const_cast<int32_t*>(p.selected) + 1; },
               "selected");
    }
}

}  // namespace
}  // namespace sieve::test

#include "models/deepseek_v4/step_plan.h"

#include <algorithm>

#include "sieve/kv/step_batch.h"
#include "models/allocation.h"
#include "models/deepseek_v4/step_slots.h"

namespace sieve::dsv4 {

namespace {

// Appends `need` unless a need of the same group (the member `group`) is there.
template <typename T>
void add_once(std::vector<T>& needs, T need, std::string T::*group) {
    for (const T& n : needs)
        if (n.*group == need.*group) return;
    needs.push_back(std::move(need));
}

Expected<const CacheGroup*> find_group(const StepBatch& batch, const std::string& name) {
    const CacheGroup* g = batch.caches.find(name);
    if (g == nullptr) return internal_error("the step has no cache group {}", name);
    return g;
}

template <typename T>
Expected<const T*> find_planned(const std::vector<T>& planned, std::string_view group, std::string T::*name,
                                std::string_view what) {
    for (const T& p : planned)
        if (p.*name == group) return &p;
    return internal_error("deepseek_v4: the step's plan has no {} for cache group {}", what, group);
}

}  // namespace

void StepPlanNeeds::add(Compressor c) { add_once(compressors, std::move(c), &Compressor::state); }
void StepPlanNeeds::add(Compressed c) { add_once(compressed, std::move(c), &Compressed::group); }
void StepPlanNeeds::add(Indexer i) { add_once(indexers, std::move(i), &Indexer::keys); }

Expected<BlockTables> StepPlan::resident_tables(Backend& backend, const StepBatch& batch, const CacheGroup& group,
                                                int64_t ratio, std::string_view what) {
    SIEVE_RETURN_IF_ERROR(check_visible_entries(batch, group, ratio));
    const int64_t stride = pack_block_tables(batch, group, staging_);
    SIEVE_ASSIGN_OR_RETURN(const int32_t* table, upload(backend, staging_, what));
    return BlockTables{table, token_request_, batch.n_requests(), stride};
}

bool StepPlan::planned(const StepBatch& batch) const { return built_ && signature_ == batch.signature(); }

Status StepPlan::build(Backend& backend, const StepBatch& batch, const StepPlanNeeds& needs) {
    built_ = false;  // not planned until every list is built
    uploads_.reset();
    const int64_t N = batch.n_tokens();
    n_tokens_ = N;
    SIEVE_ASSIGN_OR_RETURN(positions_, upload(backend, batch.positions, "the step's positions"));
    SIEVE_ASSIGN_OR_RETURN(token_request_, upload(backend, batch.token_request, "the step's token requests"));

    // Window rows: each token's own row, and the window it attends. min(w, the most positions a token
    // sees): the window of p is [p − w + 1, p] ∩ [0, p] (§3.2), so a wider list would only hold −1, and
    // sliding_window may be far above any context.
    SIEVE_ASSIGN_OR_RETURN(const CacheGroup* swa, find_group(batch, needs.window));
    window_.width = std::min(needs.sliding_window, batch.max_visible_entries(1));
    SIEVE_RETURN_IF_ERROR(scratch_resize(staging_, N, "window token slots"));
    SIEVE_RETURN_IF_ERROR(token_slots(batch, *swa, staging_.data()));
    SIEVE_ASSIGN_OR_RETURN(window_.token_slots, upload(backend, staging_, "window token slots"));
    SIEVE_RETURN_IF_ERROR(scratch_resize(staging_, N * window_.width, "window slot lists"));
    SIEVE_RETURN_IF_ERROR(window_slots(batch, *swa, window_.width, staging_.data()));
    SIEVE_ASSIGN_OR_RETURN(window_.slots, upload(backend, staging_, "window slot lists"));

    compressors_.resize(needs.compressors.size());
    for (size_t i = 0; i < needs.compressors.size(); ++i) {
        const StepPlanNeeds::Compressor& need = needs.compressors[i];
        PlannedCompressor& c = compressors_[i];
        c.state = need.state;
        SIEVE_ASSIGN_OR_RETURN(const CacheGroup* state, find_group(batch, need.state));
        SIEVE_ASSIGN_OR_RETURN(const CacheGroup* dest, find_group(batch, need.dest));
        SIEVE_RETURN_IF_ERROR(scratch_resize(staging_, N, "compressor state slots"));
        SIEVE_RETURN_IF_ERROR(token_slots(batch, *state, staging_.data()));
        SIEVE_ASSIGN_OR_RETURN(c.state_slots, upload(backend, staging_, "compressor state slots"));
        c.n_emit = count_emissions(batch, need.ratio);
        const int64_t rows = (need.overlap ? 2 : 1) * need.ratio;
        SIEVE_RETURN_IF_ERROR(scratch_resize(staging_, c.n_emit * rows, "compressor gather lists"));
        SIEVE_RETURN_IF_ERROR(scratch_resize(entry_staging_, c.n_emit, "compressed entry slots"));
        SIEVE_RETURN_IF_ERROR(scratch_resize(position_staging_, c.n_emit, "compressed entry positions"));
        SIEVE_RETURN_IF_ERROR(emission_slots(batch, *state, *dest, need.ratio, need.overlap, staging_.data(),
                                             entry_staging_.data(), position_staging_.data()));
        SIEVE_ASSIGN_OR_RETURN(c.gather, upload(backend, staging_, "compressor gather lists"));
        SIEVE_ASSIGN_OR_RETURN(c.entry_slots, upload(backend, entry_staging_, "compressed entry slots"));
        SIEVE_ASSIGN_OR_RETURN(c.entry_positions, upload(backend, position_staging_, "compressed entry positions"));
    }

    compressed_.resize(needs.compressed.size());
    for (size_t i = 0; i < needs.compressed.size(); ++i) {
        const StepPlanNeeds::Compressed& need = needs.compressed[i];
        PlannedCompressed& c = compressed_[i];
        c.group = need.group;
        SIEVE_ASSIGN_OR_RETURN(const CacheGroup* g, find_group(batch, need.group));
        // Every entry a token may read must be resident; the op then maps whichever the selection names.
        SIEVE_ASSIGN_OR_RETURN(c.tables, resident_tables(backend, batch, *g, need.ratio, "compressed-entry block tables"));
        c.ratio = need.ratio;
        c.block_size = g->block_size();
        c.n_slots = g->n_slots();
        c.visible = batch.max_visible_entries(need.ratio);
    }

    indexers_.resize(needs.indexers.size());
    for (size_t i = 0; i < needs.indexers.size(); ++i) {
        const StepPlanNeeds::Indexer& need = needs.indexers[i];
        PlannedIndexer& x = indexers_[i];
        x.keys = need.keys;
        const int64_t m = need.ratio;
        // Short-context fallback when every candidate fits (vLLM: `max_seq_len // 4 <= index_topk`, §3.6).
        const int64_t most = max_request_entries(batch, m);
        x.scored = most > need.top_k;
        // A row never holds more than its causal entries, and index_topk may be far above any context. A
        // scored step has more than top_k entries, so W = top_k.
        x.width = std::min(need.top_k, most);
        SIEVE_RETURN_IF_ERROR(scratch_resize(x.candidates, N, "indexer candidate counts"));
        for (int64_t t = 0; t < N; ++t)
            x.candidates[static_cast<size_t>(t)] = static_cast<int32_t>((batch.positions[static_cast<size_t>(t)] + 1) / m);
        x.n_keys = nullptr;
        x.tables = {};
        x.max_keys = 0;
        if (!x.scored) continue;
        SIEVE_ASSIGN_OR_RETURN(x.n_keys, upload(backend, x.candidates, "indexer candidate counts"));
        SIEVE_ASSIGN_OR_RETURN(const CacheGroup* keys, find_group(batch, need.keys));
        x.max_keys = most;
        // Every candidate a token scores must be resident; the op reads them through the tables.
        SIEVE_ASSIGN_OR_RETURN(x.tables, resident_tables(backend, batch, *keys, m, "indexer-key block tables"));
        x.n_slots = keys->n_slots();
    }

    signature_ = batch.signature();
    built_ = true;
    return Status::ok();
}

Expected<const PlannedCompressor*> StepPlan::compressor(std::string_view state_group) const {
    return find_planned(compressors_, state_group, &PlannedCompressor::state, "compressor");
}
Expected<const PlannedCompressed*> StepPlan::compressed(std::string_view group) const {
    return find_planned(compressed_, group, &PlannedCompressed::group, "compressed-entry tables");
}
Expected<const PlannedIndexer*> StepPlan::indexer(std::string_view keys_group) const {
    return find_planned(indexers_, keys_group, &PlannedIndexer::keys, "indexer lists");
}

int64_t StepPlan::bytes() const {
    size_t b = uploads_.capacity() + signature_.capacity() * 8;
    b += (staging_.capacity() + entry_staging_.capacity()) * 4 + position_staging_.capacity() * 8;
    for (const PlannedIndexer& x : indexers_) b += x.candidates.capacity() * 4;
    return static_cast<int64_t>(b);
}

}  // namespace sieve::dsv4

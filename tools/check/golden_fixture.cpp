#include "golden_fixture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "sieve/io/safetensors.h"
#include "sieve/models/registry.h"

namespace sieve {

namespace {

Expected<Tensor> golden_tensor(const SafetensorsFile& golden, const std::string& name, DType dtype) {
    SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView v, golden.tensor(name));
    if (v.dtype != dtype)
        return corrupt_error("{}: tensor {} is {}, expected {}", golden.file_name(), name, v.dtype_string,
                             dtype_safetensors_name(dtype));
    return read_tensor(v, dtype);
}

// A captured hidden-state tensor: [T, hidden], finite, not all zero (an all-zero reference output
// would let an all-zero result pass with a relative error of 0/0).
Expected<Tensor> hidden_states(const SafetensorsFile& golden, const std::string& name, int64_t n_tokens,
                               int64_t hidden) {
    SIEVE_ASSIGN_OR_RETURN(Tensor t, golden_tensor(golden, name, DType::f32));
    const Shape want{n_tokens, hidden};
    if (t.shape() != want)
        return corrupt_error("{}: tensor {} has shape {}, expected {}", golden.file_name(), name,
                             shape_to_string(t.shape()), shape_to_string(want));
    bool any_nonzero = false;
    for (int64_t i = 0; i < t.numel(); ++i) {
        const float v = t.as<float>()[i];
        if (!std::isfinite(v))
            return corrupt_error("{}: tensor {} has a non-finite value {} at row {}, column {}", golden.file_name(),
                                 name, v, i / hidden, i % hidden);
        any_nonzero |= v != 0.0f;
    }
    if (!any_nonzero) return corrupt_error("{}: tensor {} is all zero", golden.file_name(), name);
    return t;
}

// Reads a .topk as golden_format.md says ("-1 or out-of-causal-range entries mean none; compare as
// sets"). What each entry e of row t means, for a request of T tokens:
//   -1                                      none (the format's padding);
//   0 ≤ e < causal_candidates(t)            selected;
//   causal_candidates(t) ≤ e < range(T)     none: past the token's causal range. torch.topk over a
//                                           masked row with fewer candidates than k returns such
//                                           positions (DSA: future tokens, dsa_mla.md §2.7;
//                                           DeepSeek-V4: entries not complete at t, §3.6);
//   e < -1 or e ≥ range(T)                  corrupt: no reference emits it (torch.topk's indices lie in
//                                           the row it ran over, and -1 is the only padding), so the
//                                           fixture is refused rather than guessed at;
//   an entry ≥ 0 listed twice in a row      corrupt: torch.topk never repeats an index, and reading
//                                           the row as a set would silently shrink the selection.
// A row that selects nothing although its token has candidates is corrupt too: every family's
// reference selects min(k, candidates) ≥ 1 of them (an all -1 .topk would otherwise fail every
// token as a verdict on sieve).
Expected<GoldenTopk> reference_topk(const SafetensorsFile& golden, const std::string& name, TopkIndexSpace space,
                                    int64_t n_tokens) {
    SIEVE_ASSIGN_OR_RETURN(Tensor t, golden_tensor(golden, name, DType::i32));
    const int64_t range = space.range(n_tokens);
    if (t.rank() != 2 || t.dim(0) != n_tokens || (t.dim(1) == 0 && range > 0))
        return corrupt_error("{}: tensor {} has shape {}, expected [{}, K] with K ≥ 1", golden.file_name(), name,
                             shape_to_string(t.shape()), n_tokens);
    GoldenTopk topk;
    topk.space = space;
    topk.sets.resize(static_cast<size_t>(n_tokens));
    const int64_t k = t.dim(1);
    for (int64_t row = 0; row < n_tokens; ++row) {
        const int32_t* entries = t.as<int32_t>() + row * k;
        const int64_t causal = space.causal_candidates(row);
        std::vector<int32_t>& set = topk.sets[static_cast<size_t>(row)];
        std::set<int32_t> seen;
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = entries[j];
            if (e == -1) continue;
            if (e < -1 || e >= range)
                return corrupt_error("{}: tensor {} row {} has entry {}, outside [-1, {}) (the request's {} {})",
                                     golden.file_name(), name, row, e, range, range,
                                     space.tokens_per_entry == 1 ? "tokens" : "compressed entries");
            if (!seen.insert(e).second)
                return corrupt_error("{}: tensor {} row {} lists entry {} twice", golden.file_name(), name, row, e);
            if (e >= causal) {
                ++topk.none_entries;
                continue;
            }
            set.push_back(e);
        }
        if (set.empty() && causal > 0)
            return corrupt_error("{}: tensor {} row {} selects nothing, though the token has {} candidate(s)",
                                 golden.file_name(), name, row, causal);
        std::sort(set.begin(), set.end());
    }
    return topk;
}

Expected<int64_t> request_count(const SafetensorsFile& golden) {
    const auto& meta = golden.metadata();
    auto it = meta.find("requests");
    if (it == meta.end()) return corrupt_error("{}: metadata has no \"requests\"", golden.file_name());
    int64_t n = 0;
    const std::string& s = it->second;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end != s.data() + s.size())
        return corrupt_error("{}: metadata \"requests\" = \"{}\" is not a number", golden.file_name(), s);
    if (n < 1)
        return corrupt_error("{}: metadata \"requests\" = {}: a fixture without requests checks nothing",
                             golden.file_name(), n);
    return n;
}

}  // namespace

Expected<TopkIndexSpace> topk_index_space(const ModelConfig& config, int64_t layer) {
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    SIEVE_ASSIGN_OR_RETURN(const int64_t tokens_per_index, family->topk_tokens_per_index(config, layer));
    return TopkIndexSpace{tokens_per_index};
}

Expected<GoldenFixture> read_golden_fixture(const std::filesystem::path& golden_path, const ModelConfig& config,
                                            std::span<const int64_t> layers, int64_t hidden) {
    SIEVE_ASSIGN_OR_RETURN(auto golden, SafetensorsFile::open(golden_path));
    const std::string& file = golden->file_name();
    const auto& meta = golden->metadata();
    if (!meta.count("format") || meta.at("format") != "sieve-golden/1")
        return corrupt_error("{}: metadata \"format\" is not sieve-golden/1", file);
    if (!meta.count("family")) return corrupt_error("{}: metadata has no \"family\"", file);
    if (meta.at("family") != config.model_type)
        return corrupt_error("{}: metadata \"family\" is {}, but the checkpoint's model_type is {}", file,
                             meta.at("family"), config.model_type);
    if (layers.empty())
        return corrupt_error("{}: the {} model has no attention layer to check", file, config.model_type);
    SIEVE_ASSIGN_OR_RETURN(const int64_t n_requests, request_count(*golden));

    GoldenFixture fixture;
    fixture.family = meta.at("family");
    fixture.layers.assign(layers.begin(), layers.end());
    std::set<std::string> read;  // every tensor the check uses
    for (int64_t r = 0; r < n_requests; ++r) {
        GoldenRequest g;
        const std::string positions_name = fmt::format("req{}.positions", r);
        SIEVE_ASSIGN_OR_RETURN(Tensor positions, golden_tensor(*golden, positions_name, DType::i64));
        read.insert(positions_name);
        if (positions.rank() != 1 || positions.numel() == 0)
            return corrupt_error("{}: tensor {} has shape {}, expected [T] with T ≥ 1", file, positions_name,
                                 shape_to_string(positions.shape()));
        g.n_tokens = positions.numel();
        for (int64_t t = 0; t < g.n_tokens; ++t)
            if (positions.as<int64_t>()[t] != t)
                return unsupported_error("{}: {}[{}] = {}: only positions 0..T-1 are supported", file,
                                         positions_name, t, positions.as<int64_t>()[t]);
        for (int64_t layer : layers) {
            const std::string base = fmt::format("req{}.layer{}", r, layer);
            GoldenLayer l;
            SIEVE_ASSIGN_OR_RETURN(l.input, hidden_states(*golden, base + ".input", g.n_tokens, hidden));
            SIEVE_ASSIGN_OR_RETURN(l.output, hidden_states(*golden, base + ".output", g.n_tokens, hidden));
            read.insert(base + ".input");
            read.insert(base + ".output");
            if (golden->find(base + ".topk")) {
                auto space = topk_index_space(config, layer);
                if (!space) return space.status().with_context(fmt::format("{}: tensor {}.topk", file, base));
                SIEVE_ASSIGN_OR_RETURN(l.topk, reference_topk(*golden, base + ".topk", *space, g.n_tokens));
                l.has_topk = true;
                read.insert(base + ".topk");
            }
            g.layers.push_back(std::move(l));
        }
        fixture.requests.push_back(std::move(g));
    }
    // A tensor the check does not read means the metadata or the model disagree with the fixture
    // (more requests than "requests" says, a layer the model does not run): it would go unchecked.
    for (const SafetensorsTensorInfo& t : golden->tensors())
        if (!read.count(t.name))
            return corrupt_error("{}: tensor {} is not compared by the check ({} request(s); the model runs layers {})",
                                 file, t.name, n_requests, fmt::join(layers, ", "));
    return fixture;
}

}  // namespace sieve

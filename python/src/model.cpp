// sieve._sieve.AttentionModel: a checkpoint's attention layers stepped one layer at a time over caches
// sieve owns (runtime/layer_stepper.h), with the metadata an engine has per step: the requests' ids,
// query_start_loc and positions (vLLM's names). python/sieve/model.py wraps it.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "errors.h"
#include "model_bindings.h"
#include "op_backend.h"
#include "sieve/backends/backend.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/layer_stepper.h"
#include "tensor_arg.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

NumericsProfile parse_profile(const std::string& name) {
    for (NumericsProfile p : {NumericsProfile::exact, NumericsProfile::deployed})
        if (numerics_profile_name(p) == name) return p;
    throw StatusError(invalid_argument_error("sieve.AttentionModel: profile '{}', expected 'exact' or 'deployed'", name));
}

// Reads an int32 or int64 vector argument (metadata is small; a copy is cheap).
std::vector<int64_t> int_vector(const TensorArg& t) {
    t.expect_host();
    t.expect_dtype({DType::i32, DType::i64}).expect_shape({-1}, "n").expect_contiguous();
    std::vector<int64_t> out(static_cast<size_t>(t.dim(0)));
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = t.dtype() == DType::i32 ? static_cast<const int32_t*>(t.data())[i] : static_cast<const int64_t*>(t.data())[i];
    return out;
}

class AttentionModelBinding {
public:
    AttentionModelBinding(const std::string& checkpoint_dir, std::optional<std::vector<int64_t>> layers,
                          const std::string& profile, const std::string& backend, int64_t cache_tokens,
                          int64_t max_requests_per_step, bool caller_caches, int64_t state_block_size,
                          int64_t cache_block_size) {
        const ModelConfig config = value_or_throw(load_model_config(checkpoint_dir));
        checkpoint_ = value_or_throw(Checkpoint::open(checkpoint_dir));
        backend_ = value_or_throw(make_backend(backend));
        ModelOptions options;
        options.profile = parse_profile(profile);
        options.backend = backend_.get();
        if (layers) options.layers = *layers;
        options.state_block_size = state_block_size;
        options.cache_block_size = cache_block_size;
        {
            nb::gil_scoped_release release;
            auto lock = lock_engine();  // loading prepares weights on the backend's threads
            model_ = value_or_throw(load_attention_model(config, *checkpoint_, options));
        }
        if (caller_caches) return;  // bind_caches makes the stepper
        CachePoolOptions pools;
        pools.cache_budget_tokens = cache_tokens;
        pools.max_requests_per_step = max_requests_per_step;
        stepper_ = value_or_throw(LayerStepper::create(*model_, pools));
    }

    // What an engine allocates for each cache group when it holds the caches (caller_caches).
    nb::list cache_specs() const {
        nb::list out;
        for (const CacheGroupDesc& d : model_->cache_groups()) {
            nb::dict g;
            g["name"] = d.name;
            g["block_size"] = d.block_size;
            g["tokens_per_entry"] = d.spec.tokens_per_entry;
            g["window_tokens"] = d.spec.window_tokens;
            g["entry_bytes"] = d.spec.entry_bytes;
            g["format"] = d.spec.format;
            g["layers"] = d.layers;  // model layer ids, in the order bind_caches takes their tensors
            g["block_bytes"] = workspace_round_up(d.block_size * d.spec.entry_bytes);  // the least block stride
            out.append(g);
        }
        return out;
    }

    // caller_caches: the engine's cache tensors, [name] → one tensor per layer of the group, each
    // [num_blocks, ...] whose stride(0) is the block stride. The tensors stay referenced here.
    void bind_caches(const std::map<std::string, std::vector<Array>>& caches) {
        const char* op = "AttentionModel.bind_caches";
        if (stepper_) throw StatusError(invalid_argument_error("sieve.{}: the caches are already bound (or sieve's own)", op));
        std::vector<AdoptedCacheGroup> groups;
        for (const auto& [name, tensors] : caches) {
            AdoptedCacheGroup g;
            g.name = name;
            for (size_t l = 0; l < tensors.size(); ++l) {
                const std::string label = fmt::format("caches['{}'][{}]", name, l);
                const TensorArg t(op, label.c_str(), tensors[l]);
                const CacheBlocks blocks = cache_blocks(t);
                if (l == 0) {
                    g.num_blocks = blocks.n_blocks;
                    g.block_bytes = blocks.stride_bytes;
                } else if (blocks.n_blocks != g.num_blocks || blocks.stride_bytes != g.block_bytes) {
                    t.fail(fmt::format("{} blocks at a stride of {} bytes; layer 0 of the group has {} at {}",
                                       blocks.n_blocks, blocks.stride_bytes, g.num_blocks, g.block_bytes));
                }
                const auto bytes = static_cast<size_t>(blocks.extent_bytes());
                g.layers.push_back(value_or_throw(backend_->buffer_wrap(t.data(), bytes, BufferUsage::cache, label)));
                kept_.push_back(tensors[l]);
            }
            groups.push_back(std::move(g));
        }
        stepper_ = LayerStepper::create(*model_, value_or_throw(CachePools::adopt(*model_, std::move(groups))));
    }

    std::string model_type() const { return model_->model_type(); }
    std::vector<int64_t> layers() const { return model_->layers(); }
    int64_t hidden_size() const { return model_->hidden_size(); }
    int64_t max_position_embeddings() const { return model_->max_position_embeddings(); }
    std::string backend_name() const { return backend_->name(); }
    nb::list cache_groups() const {
        nb::list out;
        if (!stepper_) return out;
        for (const auto& g : stepper_->caches().groups()) {
            nb::dict d;
            d["name"] = g->name();
            d["block_size"] = g->block_size();
            d["num_blocks"] = g->allocator().total_blocks();
            d["used_blocks"] = g->allocator().used_blocks();
            d["tokens_per_entry"] = g->spec().tokens_per_entry;
            d["entry_bytes"] = g->spec().entry_bytes;
            d["layers"] = g->n_layers();
            d["bytes"] = g->storage_bytes();
            out.append(d);
        }
        return out;
    }

    void begin_step(const std::vector<int64_t>& request_ids, const Array& query_start_loc_array,
                    const Array& positions_array, const std::optional<std::map<std::string, Array>>& block_tables,
                    const std::optional<std::vector<bool>>& reuse_selection) {
        const char* op = "AttentionModel.begin_step";
        if (!stepper_) throw StatusError(invalid_argument_error("sieve.{}: no caches bound (bind_caches)", op));
        const std::vector<int64_t> qsl = int_vector(TensorArg(op, "query_start_loc", query_start_loc_array));
        const std::vector<int64_t> positions = int_vector(TensorArg(op, "positions", positions_array));
        const size_t n_requests = request_ids.size();
        if (qsl.size() != n_requests + 1 || qsl.front() != 0 || qsl.back() != static_cast<int64_t>(positions.size()))
            throw StatusError(invalid_argument_error(
                "sieve.{}: query_start_loc has {} values, first {}, last {}; expected {} (one per request + 1), from 0 to "
                "the {} positions",
                op, qsl.size(), qsl.empty() ? 0 : qsl.front(), qsl.empty() ? 0 : qsl.back(), n_requests + 1,
                positions.size()));
        if (reuse_selection && reuse_selection->size() != n_requests)
            throw StatusError(invalid_argument_error("sieve.{}: reuse_selection has {} values, one per request ({})", op,
                                                     reuse_selection->size(), n_requests));
        std::vector<StepRequest> requests;
        for (size_t r = 0; r < n_requests; ++r) {
            const int64_t begin = qsl[r], end = qsl[r + 1];
            if (end <= begin)
                throw StatusError(invalid_argument_error("sieve.{}: request {} has {} tokens (query_start_loc {} → {})",
                                                         op, request_ids[r], end - begin, begin, end));
            const int64_t start = positions[static_cast<size_t>(begin)];
            for (int64_t t = begin; t < end; ++t)
                if (positions[static_cast<size_t>(t)] != start + (t - begin))
                    throw StatusError(invalid_argument_error(
                        "sieve.{}: request {}: position {} at token {}, expected {} (a request's tokens are consecutive "
                        "positions)",
                        op, request_ids[r], positions[static_cast<size_t>(t)], t, start + (t - begin)));
            requests.push_back({request_ids[r], start, end - begin, false});
            requests.back().reuse_selection = reuse_selection && (*reuse_selection)[r];
        }
        if (stepper_->caches().adopted() != block_tables.has_value())
            throw StatusError(invalid_argument_error(
                "sieve.{}: block_tables come with the engine's caches (bind_caches), and only with them", op));
        if (block_tables)
            for (const auto& [name, array] : *block_tables) {
                const std::string label = fmt::format("block_tables['{}']", name);
                const TensorArg t(op, label.c_str(), array);
                t.expect_host();
                t.expect_dtype({DType::i32}).expect_shape({static_cast<int64_t>(n_requests), -1}, "n_requests, max_blocks").expect_rows_contiguous();
                for (size_t r = 0; r < n_requests; ++r) {
                    const int32_t* row = static_cast<const int32_t*>(t.data()) + static_cast<int64_t>(r) * t.stride(0);
                    check(stepper_->set_block_table(name, request_ids[r], std::vector<int32_t>(row, row + t.dim(1))));
                }
            }
        nb::gil_scoped_release release;  // before the lock: a thread waiting for it must not hold the GIL
        auto lock = lock_engine();
        check(stepper_->begin_step(std::move(requests)));
    }

    void forward(int64_t layer_pos, const Array& input_array, const Array& output_array) {
        const char* op = "AttentionModel.forward";
        const TensorArg input(op, "hidden_states", input_array), output(op, "out", output_array);
        input.expect_host();
        output.expect_host();
        const int64_t n_tokens = stepper_ && stepper_->in_step() ? stepper_->batch().n_tokens() : -1;
        input.expect_dtype({DType::f32}).expect_shape({n_tokens, hidden_size()}, "the step's tokens, hidden_size").expect_contiguous();
        output.expect_dtype({DType::f32}).expect_shape({n_tokens, hidden_size()}, "the step's tokens, hidden_size").expect_contiguous();
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        check(stepper_->forward(layer_pos, static_cast<const float*>(input.data()), static_cast<float*>(output.data())));
    }

    void end_step() {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        if (!stepper_) throw StatusError(invalid_argument_error("sieve.AttentionModel.end_step: no step is open"));
        check(stepper_->end_step());
    }
    void reuse_selections() {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        if (!stepper_)
            throw StatusError(invalid_argument_error("sieve.AttentionModel.reuse_selections: no caches bound (bind_caches)"));
        check(stepper_->reuse_selections());
    }
    void rollback(int64_t id, int64_t tokens) {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        if (!stepper_) throw StatusError(invalid_argument_error("sieve.AttentionModel.rollback: no request has run"));
        check(stepper_->rollback(id, tokens));
    }
    int64_t attach_prefix(int64_t id, std::vector<uint64_t> keys, int64_t max_tokens) {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        if (!stepper_)
            throw StatusError(invalid_argument_error(
                "sieve.AttentionModel.attach_prefix: with the engine's caches its block tables share prefixes"));
        return value_or_throw(stepper_->attach_prefix(id, std::move(keys), max_tokens));
    }
    // Tokens of a prompt chunk that prefix caching keys (0 with the engine's caches).
    int64_t prefix_chunk_tokens() const {
        const PrefixCache* cache = stepper_ ? stepper_->caches().prefix_cache() : nullptr;
        return cache ? cache->chunk_tokens() : 0;
    }
    void free_request(int64_t id) {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        if (stepper_) stepper_->free_request(id);
    }
    int64_t tokens_done(int64_t id) const { return stepper_ ? stepper_->tokens_done(id) : 0; }
    bool in_step() const { return stepper_ && stepper_->in_step(); }

private:
    std::unique_ptr<Checkpoint> checkpoint_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<AttentionModel> model_;
    std::unique_ptr<LayerStepper> stepper_;  // null until bind_caches with caller_caches
    std::vector<Array> kept_;                // the engine's cache tensors, referenced while bound
};

}  // namespace

void bind_model(nb::module_& m) {
    nb::class_<AttentionModelBinding>(m, "AttentionModel")
        .def(nb::init<const std::string&, std::optional<std::vector<int64_t>>, const std::string&, const std::string&,
                      int64_t, int64_t, bool, int64_t, int64_t>(),
             nb::arg("checkpoint"), nb::arg("layers").none(), nb::arg("profile"), nb::arg("backend"),
             nb::arg("cache_tokens"), nb::arg("max_requests_per_step"), nb::arg("caller_caches"),
             nb::arg("state_block_size"), nb::arg("cache_block_size"))
        .def_prop_ro("cache_specs", &AttentionModelBinding::cache_specs)
        .def("bind_caches", &AttentionModelBinding::bind_caches, nb::arg("caches"))
        .def_prop_ro("model_type", &AttentionModelBinding::model_type)
        .def_prop_ro("layers", &AttentionModelBinding::layers)
        .def_prop_ro("hidden_size", &AttentionModelBinding::hidden_size)
        .def_prop_ro("max_position_embeddings", &AttentionModelBinding::max_position_embeddings)
        .def_prop_ro("backend_name", &AttentionModelBinding::backend_name)
        .def_prop_ro("cache_groups", &AttentionModelBinding::cache_groups)
        .def_prop_ro("in_step", &AttentionModelBinding::in_step)
        .def("begin_step", &AttentionModelBinding::begin_step, nb::arg("request_ids"), nb::arg("query_start_loc"),
             nb::arg("positions"), nb::arg("block_tables").none(), nb::arg("reuse_selection").none())
        .def("forward", &AttentionModelBinding::forward, nb::arg("layer_pos"), nb::arg("hidden_states"), nb::arg("out"))
        .def("end_step", &AttentionModelBinding::end_step)
        .def("reuse_selections", &AttentionModelBinding::reuse_selections)
        .def("rollback", &AttentionModelBinding::rollback, nb::arg("request_id"), nb::arg("tokens"))
        .def("attach_prefix", &AttentionModelBinding::attach_prefix, nb::arg("request_id"), nb::arg("chunk_keys"),
             nb::arg("max_tokens"))
        .def_prop_ro("prefix_chunk_tokens", &AttentionModelBinding::prefix_chunk_tokens)
        .def("free_request", &AttentionModelBinding::free_request, nb::arg("request_id"))
        .def("tokens_done", &AttentionModelBinding::tokens_done, nb::arg("request_id"));
}

}  // namespace sieve::python

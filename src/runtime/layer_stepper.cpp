#include "sieve/runtime/layer_stepper.h"

#include <set>
#include <utility>

#include <fmt/format.h>

#include "runtime/selection_reuse.h"

namespace sieve {

Expected<std::unique_ptr<LayerStepper>> LayerStepper::create(AttentionModel& model, const CachePoolOptions& options) {
    SIEVE_ASSIGN_OR_RETURN(auto pools, CachePools::create(model, options));
    return std::unique_ptr<LayerStepper>(new LayerStepper(model, std::move(pools)));
}

std::unique_ptr<LayerStepper> LayerStepper::create(AttentionModel& model, std::unique_ptr<CachePools> pools) {
    return std::unique_ptr<LayerStepper>(new LayerStepper(model, std::move(pools)));
}

LayerStepper::LayerStepper(AttentionModel& model, std::unique_ptr<CachePools> pools)
    : model_(model), pools_(std::move(pools)) {}

LayerStepper::~LayerStepper() {
    if (reuse_) model_.set_selection_observer(nullptr);
}

Status LayerStepper::reuse_selections() {
    if (batch_) return invalid_argument_error("reuse_selections: a step is open (call end_step first)");
    if (pools_->adopted())
        return invalid_argument_error("reuse_selections: over adopted pools a request lives for one step, so no "
                                      "selection outlives it");
    if (reuse_) return Status::ok();
    reuse_ = std::make_unique<SelectionReuse>();
    model_.set_selection_observer(reuse_.get());
    return Status::ok();
}

int64_t LayerStepper::tokens_done(RequestId id) const {
    auto it = done_.find(id);
    return it == done_.end() ? 0 : it->second;
}

Status LayerStepper::fail_step(Status why) {
    batch_.reset();
    next_layer_ = 0;
    return why;
}

Status LayerStepper::begin_step(std::vector<StepRequest> requests) {
    if (batch_) return invalid_argument_error("begin_step: the previous step is still open (end_step was not called)");
    if (requests.empty()) return invalid_argument_error("begin_step: a step needs at least one request");
    std::set<RequestId> ids;
    for (StepRequest& r : requests) {
        if (!ids.insert(r.id).second) return invalid_argument_error("begin_step: request {} appears twice", r.id);
        if (r.n_tokens < 1) return invalid_argument_error("begin_step: request {} runs {} tokens", r.id, r.n_tokens);
        const int64_t done = tokens_done(r.id);
        if (r.start != done && !pools_->adopted())
            return invalid_argument_error(
                "begin_step: request {} starts at position {}, but it has run {} tokens (a step continues where the "
                "request's last one stopped)",
                r.id, r.start, done);
        if (r.end() > model_.max_position_embeddings())
            return invalid_argument_error("begin_step: request {} reaches {} tokens, more than max_position_embeddings "
                                          "= {} of {}",
                                          r.id, r.end(), model_.max_position_embeddings(), model_.model_type());
        r.is_decode = r.n_tokens == 1 && r.start > 0;
        if (r.reuse_selection) {
            if (!reuse_)
                return invalid_argument_error("begin_step: request {} reuses its selections, but this stepper keeps "
                                              "none (call reuse_selections first)",
                                              r.id);
            if (r.n_tokens != 1 || !reuse_->has(r.id))
                return invalid_argument_error("begin_step: request {} reuses its selections with {} tokens{}; a draft "
                                              "token reusing them runs alone, after a step that selected anew",
                                              r.id, r.n_tokens, reuse_->has(r.id) ? "" : " and no step that selected");
        }
    }
    for (const StepRequest& r : requests) {
        // The oldest position a rollback may return to: this step's start, or, for a later draft token, the
        // start of the request's draft steps (its last step that selected anew).
        const int64_t floor = r.reuse_selection ? last_start_.at(r.id) : r.start;
        if (auto p = prefix_keys_.find(r.id); p != prefix_keys_.end())  // before a window block is let go
            p->second.cached = pools_->prefix_cache()->publish(r.id, p->second.keys, floor, p->second.cached);
        if (!pools_->adopted()) pools_->after_step(r.id, floor);  // what a token at the floor no longer sees
        SIEVE_RETURN_IF_ERROR(pools_->reserve(r));
    }
    StepBatch batch = make_step_batch(std::move(requests), pools_->step_caches());
    if (reuse_) reuse_->begin_step(batch);
    const size_t bytes = static_cast<size_t>(batch.n_tokens() * model_.hidden_size()) * sizeof(float);
    Backend& backend = model_.backend();
    for (auto* buffer : {&rows_in_, &rows_out_}) {
        if (*buffer && (*buffer)->bytes() >= bytes) continue;
        buffer->reset();
        SIEVE_ASSIGN_OR_RETURN(*buffer, backend.buffer_alloc(bytes, BufferUsage::workspace, "the step's activations"));
    }
    SIEVE_RETURN_IF_ERROR(model_.plan_step(batch));
    batch_ = std::move(batch);
    next_layer_ = 0;
    return Status::ok();
}

// Fails the step unless a step is open and `layer_pos` is the next layer to run.
Status LayerStepper::check_next_layer(std::string_view call, int64_t layer_pos) {
    if (!batch_) return invalid_argument_error("{}: no step is open (call begin_step first)", call);
    const int64_t n_layers = static_cast<int64_t>(model_.layers().size());
    if (layer_pos != next_layer_)
        return fail_step(invalid_argument_error("{}: layer position {}, expected {} (of {}: each layer once per step, in "
                                                "order)",
                                                call, layer_pos, next_layer_, n_layers));
    return Status::ok();
}

Status LayerStepper::forward(int64_t layer_pos, const float* input, float* output, StageTimes* times) {
    SIEVE_RETURN_IF_ERROR(check_next_layer("forward", layer_pos));
    const size_t bytes = static_cast<size_t>(batch_->n_tokens() * model_.hidden_size()) * sizeof(float);
    Backend& backend = model_.backend();
    Status s = backend.buffer_upload(*rows_in_, 0, input, bytes);
    if (s.is_ok()) s = model_.forward(layer_pos, *batch_, rows_in_->as<float>(), rows_out_->as<float>(), times);
    if (s.is_ok() && reuse_) s = reuse_->step_error();
    if (s.is_ok()) s = backend.buffer_download(*rows_out_, 0, output, bytes);
    if (!s.is_ok()) return fail_step(s.with_context(fmt::format("layer {}", model_.layers()[static_cast<size_t>(layer_pos)])));
    ++next_layer_;
    return Status::ok();
}

Status LayerStepper::forward_on_backend(int64_t layer_pos, const float* input, float* output) {
    SIEVE_RETURN_IF_ERROR(check_next_layer("forward_on_backend", layer_pos));
    if (input == nullptr || output == nullptr)
        return fail_step(invalid_argument_error("forward_on_backend: null {} rows", input == nullptr ? "input" : "output"));
    Status s = model_.forward(layer_pos, *batch_, input, output, nullptr);
    if (s.is_ok() && reuse_) s = reuse_->step_error();
    if (!s.is_ok()) return fail_step(s.with_context(fmt::format("layer {}", model_.layers()[static_cast<size_t>(layer_pos)])));
    ++next_layer_;
    return Status::ok();
}

Status LayerStepper::end_step() {
    if (!batch_) return invalid_argument_error("end_step: no step is open");
    for (const StepRequest& r : batch_->requests) {
        if (pools_->adopted()) {
            pools_->free_request(r.id);  // the engine's request: known for this step only
            continue;
        }
        done_[r.id] = r.end();
        if (!r.reuse_selection) last_start_[r.id] = r.start;
        pools_->after_step(r.id, last_start_[r.id]);  // a rollback may return there; begin_step releases the rest
    }
    if (reuse_) reuse_->end_step();
    batch_.reset();
    next_layer_ = 0;
    return Status::ok();
}

Status LayerStepper::rollback(RequestId id, int64_t tokens) {
    if (batch_) return invalid_argument_error("rollback: a step is open (call end_step first)");
    if (pools_->adopted())
        return invalid_argument_error("rollback: over adopted pools the engine's start of each step decides the positions");
    auto done = done_.find(id);
    if (done == done_.end()) return invalid_argument_error("rollback: request {} has run no step", id);
    const int64_t floor = last_start_.at(id);
    if (tokens < floor || tokens > done->second)
        return invalid_argument_error("rollback: request {} can keep {} … {} of its tokens (its last step{} started at "
                                      "{}), not {}",
                                      id, floor, done->second, reuse_ ? " that selected anew" : "", floor, tokens);
    done->second = tokens;
    // Selections made at a position that is no longer kept are not the request's any more.
    if (reuse_ && reuse_->has(id) && reuse_->position(id) >= tokens) reuse_->drop(id);
    return Status::ok();
}

Expected<int64_t> LayerStepper::attach_prefix(RequestId id, std::vector<uint64_t> keys, int64_t max_tokens) {
    PrefixCache* cache = pools_->prefix_cache();
    if (!cache)
        return invalid_argument_error("attach_prefix: over adopted pools the engine's block tables share prefixes");
    if (batch_) return invalid_argument_error("attach_prefix: a step is open (call end_step first)");
    if (done_.count(id) || prefix_keys_.count(id))
        return invalid_argument_error("attach_prefix: request {} has already started; a prefix starts a request", id);
    SIEVE_ASSIGN_OR_RETURN(const int64_t tokens, cache->attach(id, keys, max_tokens));
    if (tokens > 0) {
        done_[id] = tokens;
        last_start_[id] = tokens;
    }
    prefix_keys_[id] = {std::move(keys), 0};
    return tokens;
}

void LayerStepper::free_request(RequestId id) {
    if (auto p = prefix_keys_.find(id); p != prefix_keys_.end()) {
        pools_->prefix_cache()->publish(id, p->second.keys, tokens_done(id), p->second.cached);
        prefix_keys_.erase(p);
    }
    pools_->free_request(id);
    model_.release_request(id);
    if (reuse_) reuse_->drop(id);
    done_.erase(id);
    last_start_.erase(id);
}

}  // namespace sieve

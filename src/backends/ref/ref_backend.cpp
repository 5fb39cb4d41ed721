// The ref backend: wires the scalar oracle functions of this folder into the Backend interface.
#include "backends/ref/ref_backend.h"

#include "backends/host/host_memory.h"
#include "backends/ref/dsa_ref_ops.h"
#include "backends/ref/qsa_ref.h"
#include "backends/ref/ref_ops.h"
#include "backends/ref/ref_ops_dsv4.h"

namespace sieve {

namespace {

class RefBackend final : public HostMemoryBackend {
public:
    const std::string& name() const override { return name_; }

    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        return ref::linear_prepare(w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        SIEVE_RETURN_IF_ERROR(validate(shape, w.x_features(), w.out_features(), /*check_pointers=*/false));
        LinearPlan plan = LinearPlan::of_shape(shape);
        plan.kernel = "linear_ref";
        return plan;
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace) override {
        SIEVE_RETURN_IF_ERROR(check_linear_plan(plan, p));
        const auto* prepared = dynamic_cast<const ref::RefPreparedLinear*>(&w);
        if (prepared == nullptr) return invalid_argument_error("ref linear: weights were prepared by another backend");
        return ref::linear(*prepared, p);
    }
    Status rms_norm(const RmsNormParams& p) override { return ref::rms_norm(p); }
    Status layer_norm(const LayerNormParams& p) override { return ref::layer_norm(p); }
    Status rope(const RopeParams& p) override { return ref::rope(p); }
    Status quant_fp8(const QuantFp8Params& p) override { return ref::quant_fp8(p); }
    Status hadamard(const HadamardParams& p) override { return ref::hadamard(p); }
    Status cache_store(const CacheStoreParams& p) override { return ref::cache_store(p); }
    size_t topk_workspace_size(const TopkParams&) const override { return 0; }
    Status topk(const TopkParams& p, Workspace) override { return ref::topk(p); }
    size_t sparse_attention_workspace_size(const SparseAttentionParams&) const override { return 0; }
    Status sparse_attention(const SparseAttentionParams& p, Workspace) override { return ref::sparse_attention(p); }
    Status dsa_output_gate(const DsaOutputGateParams& p) override { return ref::dsa_output_gate(p); }
    size_t mla_head_proj_workspace_size(const MlaHeadProjParams&) const override { return 0; }
    Status mla_head_proj(const MlaHeadProjParams& p, Workspace) override { return ref::mla_head_proj(p); }
    Status kv_load(const KvLoadParams& p) override { return ref::kv_load(p); }
    Status selected_slots(const SelectedSlotsParams& p) override { return ref::selected_slots(p); }
    Status compressor_state_store(const CompressorStateStoreParams& p) override { return ref::compressor_state_store(p); }
    Status compressor_pool(const CompressorPoolParams& p) override { return ref::compressor_pool(p); }
    size_t indexer_scores_workspace_size(const IndexerScoresParams&) const override { return 0; }
    Status indexer_scores(const IndexerScoresParams& p, Workspace) override { return ref::indexer_scores(p); }
    Status qsa_pool(const QsaPoolParams& p) override { return ref::qsa_pool(p); }
    Status qsa_expand(const QsaExpandParams& p) override { return ref::qsa_expand(p); }
    size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams&) const override { return 0; }
    Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace) override { return ref::qsa_sparse_gqa(p); }

private:
    std::string name_ = "ref";
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace sieve

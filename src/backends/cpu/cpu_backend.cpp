// The cpu backend: validates, splits the work over the thread pool and calls the kernel table of
// its ISA level (kernels.h). Linear lives in cpu_linear.cpp.
#include "backends/cpu/cpu_backend.h"

#include <algorithm>

#include "backends/cpu/cpu_cache_ops.h"
#include "backends/cpu/cpu_dsv4_ops.h"
#include "backends/cpu/cpu_indexer_scores.h"
#include "backends/cpu/cpu_linear.h"
#include "backends/cpu/cpu_sparse_attention.h"
#include "backends/cpu/dsa_cpu_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/qsa_cpu.h"
#include "backends/cpu/row_topk.h"
#include "backends/grouped_linear.h"
#include "backends/host/host_memory.h"
#include "core/assert.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"
#ifdef SIEVE_HAS_DNNL
#include "backends/cpu/dnnl_gemm.h"
#endif

namespace sieve {

namespace {

using cpu::CpuKernels;
using cpu::parallel_chunks;
using cpu::min_chunk_for;

const CpuKernels& kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return cpu::kCpuKernelsScalar;
        case Isa::avx2: return cpu::kCpuKernelsAvx2;
        case Isa::avx512: return cpu::kCpuKernelsAvx512;
        case Isa::avx512_bf16: return cpu::kCpuKernelsAvx512Bf16;
        case Isa::amx_bf16: return cpu::kCpuKernelsAmxBf16;
    }
    return cpu::kCpuKernelsScalar;
}

std::string_view gemm_name(CpuGemm g) {
    switch (g) {
        case CpuGemm::automatic: return "auto";
        case CpuGemm::dnnl: return "dnnl";
        case CpuGemm::own: return "nodnnl";
    }
    return "?";
}

class CpuBackend final : public HostMemoryBackend {
public:
    explicit CpuBackend(const CpuBackendOptions& o)
        : options_(o),
          kernels_(&kernels_for(o.isa)),
          pool_(o.pool ? o.pool : &ThreadPool::global()),
          name_(fmt::format("cpu:{}:{}", isa_name(o.isa), gemm_name(o.gemm))) {}

    const std::string& name() const override { return name_; }

    size_t prepared_weight_bytes() const override { return cpu::cpu_live_pack_bytes(); }
    // A grouped linear runs as one linear per group (grouped_linear.h): the groups are few and each is a
    // whole GEMM that fills the threads.
    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        if (w.groups > 1)
            return GroupedPreparedLinear::prepare(w, [this](const LinearWeights& one) { return linear_prepare(one); });
        return cpu::cpu_linear_prepare(context(), w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        if (const auto* grouped = dynamic_cast<const GroupedPreparedLinear*>(&w)) return grouped_linear_plan(*this, *grouped, shape);
        SIEVE_ASSIGN_OR_RETURN(const cpu::CpuPreparedLinear* prepared, own(w));
        return cpu::cpu_linear_plan(context(), *prepared, shape);
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace ws) override {
        if (const auto* grouped = dynamic_cast<const GroupedPreparedLinear*>(&w)) return grouped_linear(*this, *grouped, plan, p, ws);
        SIEVE_ASSIGN_OR_RETURN(const cpu::CpuPreparedLinear* prepared, own(w));
        return cpu::cpu_linear_run(context(), *prepared, plan, p, ws);
    }

    Status rms_norm(const RmsNormParams& p) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        const CpuKernels& k = *kernels_;
        parallel_chunks(*pool_, p.n_tokens * p.n_heads, min_chunk_for(p.dim),
                        [&](int64_t b, int64_t e) { k.rms_norm_rows(p, b, e); });
        return Status::ok();
    }
    Status layer_norm(const LayerNormParams& p) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        const CpuKernels& k = *kernels_;
        parallel_chunks(*pool_, p.n_tokens * p.n_heads, min_chunk_for(2 * p.dim),
                        [&](int64_t b, int64_t e) { k.layer_norm_rows(p, b, e); });
        return Status::ok();
    }
    Status rope(const RopeParams& p) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        const CpuKernels& k = *kernels_;
        if (p.n_tokens == 1) {  // decode: split the heads (each chunk recomputes the token's cos/sin)
            parallel_chunks(*pool_, p.n_heads, min_chunk_for(p.head_dim),
                            [&](int64_t b, int64_t e) { k.rope_block(p, 0, 1, b, e); });
        } else {
            parallel_chunks(*pool_, p.n_tokens, min_chunk_for(p.n_heads * p.head_dim),
                            [&](int64_t b, int64_t e) { k.rope_block(p, b, e, 0, p.n_heads); });
        }
        return Status::ok();
    }
    Status quant_fp8(const QuantFp8Params& p) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        const CpuKernels& k = *kernels_;
        parallel_chunks(*pool_, p.n_tokens * p.n_heads, min_chunk_for(2 * p.dim),
                        [&](int64_t b, int64_t e) { k.quant_fp8_rows(p, b, e); });
        return Status::ok();
    }
    Status hadamard(const HadamardParams& p) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        const CpuKernels& k = *kernels_;
        int64_t log_dim = 0;
        while ((int64_t{1} << log_dim) < p.dim) ++log_dim;
        parallel_chunks(*pool_, p.n_tokens * p.n_heads, min_chunk_for(p.dim * (log_dim + 2)),
                        [&](int64_t b, int64_t e) { k.hadamard_rows(p, b, e); });
        return Status::ok();
    }

    size_t topk_workspace_size(const TopkParams& p) const override {
        return cpu::row_topk_workspace_size(*pool_, p.n_rows, p.n_cols, p.k);
    }
    Status qsa_pool(const QsaPoolParams& p) override { return cpu::qsa_pool_run(*qsa_, *pool_, p); }
    Status qsa_expand(const QsaExpandParams& p) override { return cpu::qsa_expand_run(*pool_, p); }
    size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p) const override {
        return cpu::qsa_sparse_gqa_workspace_size(*qsa_, *pool_, p);
    }
    Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws) override {
        return cpu::qsa_sparse_gqa_run(*qsa_, *pool_, p, ws);
    }
    size_t indexer_scores_workspace_size(const IndexerScoresParams& p) const override {
        return cpu::indexer_scores_workspace_size(*pool_, p);
    }
    Status indexer_scores(const IndexerScoresParams& p, Workspace ws) override {
        return cpu::indexer_scores(cpu::indexer_kernels_for(options_.isa), *kernels_, *pool_, p, ws);
    }
    Status topk(const TopkParams& p, Workspace ws) override {
        SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
        SIEVE_RETURN_IF_ERROR(check_workspace("cpu topk", ws, topk_workspace_size(p)));
        cpu::RowTopk r;
        r.scores = p.scores;
        r.scores_row_stride = p.scores_row_stride;
        r.valid_len = p.valid_len;
        r.n_rows = p.n_rows;
        r.n_cols = p.n_cols;
        r.k = p.k;
        r.out = p.out;
        r.out_row_stride = p.out_row_stride;
        r.out_count = p.out_count;
        cpu::row_topk(*kernels_, *pool_, r, ws.data);
        return Status::ok();
    }

    // ---- caches (cpu_cache_ops.cpp) ----
    Status cache_store(const CacheStoreParams& p) override { return cpu::cache_store(*kernels_, *pool_, p); }
    Status kv_load(const KvLoadParams& p) override { return cpu::kv_load(*pool_, p); }
    Status selected_slots(const SelectedSlotsParams& p) override { return cpu::selected_slots(*pool_, p); }

    // ---- DeepSeek-V4 (cpu_dsv4_ops.cpp) ----
    Status compressor_state_store(const CompressorStateStoreParams& p) override {
        return cpu::dsv4_compressor_state_store(*pool_, p);
    }
    Status compressor_pool(const CompressorPoolParams& p) override { return cpu::dsv4_compressor_pool(*pool_, p); }

    // Sparse attention (cpu_sparse_attention.h): the MQA kernel of the DeepSeek-V4 table, the MLA one of DSA's.
    size_t sparse_attention_workspace_size(const SparseAttentionParams& p) const override {
        return cpu::sparse_attention_workspace_size(attention_kernels(), *pool_, p);
    }
    Status sparse_attention(const SparseAttentionParams& p, Workspace ws) override {
        return cpu::sparse_attention(attention_kernels(), *pool_, p, ws);
    }

    // DSA on MLA (dsa_cpu_ops.h)
    Status dsa_output_gate(const DsaOutputGateParams& p) override { return cpu::dsa_output_gate(dsa_context(), p); }
    size_t mla_head_proj_workspace_size(const MlaHeadProjParams& p) const override {
        return cpu::dsa_mla_head_proj_workspace_size(dsa_context(), p);
    }
    Status mla_head_proj(const MlaHeadProjParams& p, Workspace ws) override {
        return cpu::dsa_mla_head_proj(dsa_context(), p, ws);
    }

private:
    cpu::SparseAttentionKernels attention_kernels() const {
        return {&cpu::dsv4_kernels_for(options_.isa), &cpu::dsa_kernels_for(options_.isa)};
    }
    cpu::DsaCpuContext dsa_context() const { return {&cpu::dsa_kernels_for(options_.isa), pool_}; }
    cpu::CpuLinearContext context() const { return {kernels_, options_.isa, &options_, pool_}; }
    static Expected<const cpu::CpuPreparedLinear*> own(const PreparedLinear& w) {
        const auto* prepared = dynamic_cast<const cpu::CpuPreparedLinear*>(&w);
        if (prepared == nullptr) return invalid_argument_error("cpu linear: weights were prepared by another backend");
        return prepared;
    }

    CpuBackendOptions options_;
    const CpuKernels* kernels_;
    const cpu::QsaKernels* qsa_ = &cpu::qsa_kernels_for(options_.isa);  // QSA kernels of the same ISA
    ThreadPool* pool_;
    std::string name_;
};

}  // namespace

bool cpu_backend_has_dnnl() {
#ifdef SIEVE_HAS_DNNL
    return true;
#else
    return false;
#endif
}

void cpu_set_compute_threads(int n) {
    ThreadPool& pool = ThreadPool::global();
    pool.set_active_threads(n);
#ifdef SIEVE_HAS_DNNL
    cpu::dnnl_set_threads(pool.active_threads());
#endif
}

CpuBackendOptions cpu_backend_default_options() {
    CpuBackendOptions o;
    o.isa = active_isa();
    o.gemm = cpu_backend_has_dnnl() ? CpuGemm::automatic : CpuGemm::own;
    return o;
}

Expected<std::unique_ptr<Backend>> make_cpu_backend(const CpuBackendOptions& options) {
    if (static_cast<int>(options.isa) > static_cast<int>(active_isa()))
        return unsupported_error("cpu backend: ISA {} is not available (active_isa() = {}; SIEVE_ISA caps it)",
                                 isa_name(options.isa), isa_name(active_isa()));
    if (options.gemm != CpuGemm::own) {
        if (!cpu_backend_has_dnnl())
            return unsupported_error("cpu backend: oneDNN GEMM requested ({}) but this build has SIEVE_WITH_DNNL=OFF",
                                     gemm_name(options.gemm));
        if (options.isa != active_isa())
            return unsupported_error(
                "cpu backend: oneDNN runs at the process-wide ISA {}, not {}: use gemm nodnnl for a lower ISA",
                isa_name(active_isa()), isa_name(options.isa));
#ifdef SIEVE_HAS_DNNL
        cpu::dnnl_isa_name();  // fix oneDNN's ISA before any primitive exists
#endif
    }
    if (options.dnnl_min_tokens < 1)
        return invalid_argument_error("cpu backend: dnnl_min_tokens = {}, expected ≥ 1", options.dnnl_min_tokens);
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options));
}

}  // namespace sieve

// The layer's compressors (deepseek_v4.md §3.4, §4.4): every token's state row, then each entry the
// step completes: pooled, RMSNorm-ed, rotated at k·m and stored.
#include "models/deepseek_v4/layer.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/rms_norm.h"

namespace sieve::dsv4 {

Status AttentionLayer::run_compressor(const StepBatch& batch, const StepPlan& plan, const float* x,
                                      const CompressorWeights& w, const CacheBinding& state_binding,
                                      const CacheBinding& dest_binding, const CacheRecordLayout& dest_layout,
                                      const LayerScratch& b) {
    const int64_t N = batch.n_tokens(), D = config_.hidden_size;
    const int64_t width = w.width(), m = w.ratio, c = w.head_dim;
    SIEVE_ASSIGN_OR_RETURN(const PlannedCompressor* planned, plan.compressor(state_binding.group));

    // a_s | b_s for every token, fp32 (§3.4: the reference runs these projections in fp32; vLLM GPU
    // produces fp32 from bf16 inputs), into b.comp [N, 2·width].
    SIEVE_RETURN_IF_ERROR(w.wkv_gate.run(x, DType::f32, D, b.comp, DType::f32, 2 * width, N, b.op));

    SIEVE_ASSIGN_OR_RETURN(BoundCache state, bind_cache(batch, state_binding));
    SIEVE_ASSIGN_OR_RETURN(BoundCache dest, bind_cache(batch, dest_binding));
    CompressorStateStoreParams sp;
    sp.kv = b.comp;
    sp.gate = b.comp + width;
    sp.ape = w.ape.as<float>();
    sp.positions = plan.positions();
    sp.slots = planned->state_slots;
    sp.state = state.view;
    sp.n_tokens = N;
    sp.width = width;
    sp.ratio = m;
    sp.kv_row_stride = sp.gate_row_stride = 2 * width;
    SIEVE_RETURN_IF_ERROR(backend_.compressor_state_store(sp));

    const int64_t n_emit = planned->n_emit;
    if (n_emit == 0) return Status::ok();
    CompressorPoolParams pp;
    pp.state = state.view;
    pp.gather_slots = planned->gather;
    pp.out = b.pooled;  // [n_emit, c] f32
    pp.n_entries = n_emit;
    pp.head_dim = c;
    pp.ratio = m;
    pp.overlap = w.overlap;
    pp.gather_stride = w.coff() * m;
    pp.out_row_stride = c;
    SIEVE_RETURN_IF_ERROR(backend_.compressor_pool(pp));

    // RMSNorm on the fp32 pooled value (vLLM order, §3.4; no bf16 rounding first), eps = rms_norm_eps.
    RmsNormParams np;
    np.x = np.y = b.pooled;
    np.weight = w.norm.as<float>();
    np.n_tokens = n_emit;
    np.dim = c;
    np.x_token_stride = np.y_token_stride = c;
    np.eps = static_cast<float>(config_.rms_norm_eps);
    SIEVE_RETURN_IF_ERROR(backend_.rms_norm(np));
    // RoPE at k·m on the last r dims, the layer's table (§3.4, §1.3).
    SIEVE_RETURN_IF_ERROR(rope(b.pooled, DType::f32, b.pooled, DType::f32, planned->entry_positions, n_emit, 1, c, false));

    return backend_.cache_store(record_store(b.pooled, DType::f32, c, n_emit, planned->entry_slots, dest, dest_layout));
}

}  // namespace sieve::dsv4

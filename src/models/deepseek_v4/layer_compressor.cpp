// The layer's compressors (deepseek_v4.md §3.4, §4.4): every token's state row, then each entry the
// step completes: pooled, RMSNorm-ed, rotated at k·m and stored.
#include "models/deepseek_v4/layer.h"

namespace sieve::dsv4 {

Status AttentionLayer::run_compressor(const StepBatch& batch, const float* x, const CompressorWeights& w,
                                      const CacheBinding& state_binding, const CacheBinding& dest_binding,
                                      const CacheRecordLayout& dest_layout, Scratch& s) {
    const int64_t N = batch.n_tokens(), D = config_.hidden_size;
    const int64_t width = w.width(), m = w.ratio, c = w.head_dim;
    WorkspaceBuffer& ws = s.workspace;

    // a_s | b_s for every token, fp32 (§3.4: the reference runs these projections in fp32; vLLM GPU
    // produces fp32 from bf16 inputs).
    // [N, 2·width] f32: a_s | b_s
    SIEVE_ASSIGN_OR_RETURN(float* comp, sized(s.comp, N * 2 * width, "compressor projections"));
    SIEVE_RETURN_IF_ERROR(w.wkv_gate.run(x, DType::f32, D, comp, DType::f32, 2 * width, N, ws));

    SIEVE_ASSIGN_OR_RETURN(BoundCache state, bind_cache(batch, state_binding));
    SIEVE_ASSIGN_OR_RETURN(BoundCache dest, bind_cache(batch, dest_binding));
    SIEVE_ASSIGN_OR_RETURN(int32_t* state_slots, sized(s.state_slots, N, "compressor state slots"));  // [N]
    SIEVE_RETURN_IF_ERROR(token_slots(batch, state, state_slots));
    CompressorStateStoreParams sp;
    sp.kv = comp;
    sp.gate = comp + width;
    sp.ape = w.ape.as<float>();
    sp.positions = batch.positions.data();
    sp.slots = state_slots;
    sp.state = state.view;
    sp.n_tokens = N;
    sp.width = width;
    sp.ratio = m;
    sp.kv_row_stride = sp.gate_row_stride = 2 * width;
    SIEVE_RETURN_IF_ERROR(backend_.compressor_state_store(sp));

    const int64_t n_emit = count_emissions(batch, m);
    if (n_emit == 0) return Status::ok();
    const int64_t rows = w.coff() * m;
    // [n_emit, coff·m]
    SIEVE_ASSIGN_OR_RETURN(int32_t* gather, sized(s.gather, n_emit * rows, "compressor gather lists"));
    // [n_emit]
    SIEVE_ASSIGN_OR_RETURN(int32_t* entry_slots, sized(s.entry_slots, n_emit, "compressed entry slots"));
    // [n_emit]
    SIEVE_ASSIGN_OR_RETURN(int64_t* entry_positions, sized(s.entry_positions, n_emit, "compressed entry positions"));
    SIEVE_RETURN_IF_ERROR(
        emission_slots(batch, state, dest, m, w.overlap, gather, entry_slots, entry_positions));

    SIEVE_ASSIGN_OR_RETURN(float* pooled, sized(s.pooled, n_emit * c, "pooled entries"));  // [n_emit, c] f32
    CompressorPoolParams pp;
    pp.state = state.view;
    pp.gather_slots = gather;
    pp.out = pooled;
    pp.n_entries = n_emit;
    pp.head_dim = c;
    pp.ratio = m;
    pp.overlap = w.overlap;
    pp.gather_stride = rows;
    pp.out_row_stride = c;
    SIEVE_RETURN_IF_ERROR(backend_.compressor_pool(pp));

    // RMSNorm on the fp32 pooled value (vLLM order, §3.4; no bf16 rounding first), eps = rms_norm_eps.
    RmsNormParams np;
    np.x = np.y = pooled;
    np.weight = w.norm.as<float>();
    np.n_tokens = n_emit;
    np.dim = c;
    np.x_token_stride = np.y_token_stride = c;
    np.eps = static_cast<float>(config_.rms_norm_eps);
    SIEVE_RETURN_IF_ERROR(backend_.rms_norm(np));
    // RoPE at k·m on the last r dims, the layer's table (§3.4, §1.3).
    SIEVE_RETURN_IF_ERROR(rope(pooled, DType::f32, pooled, DType::f32, entry_positions, n_emit, 1, c, false));

    return backend_.cache_store(record_store(pooled, DType::f32, c, n_emit, entry_slots, dest, dest_layout));
}

}  // namespace sieve::dsv4

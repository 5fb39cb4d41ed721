// Every pointer an op's params carry, by field name: what a device backend must find in its own memory
// (the host-copy backend refuses an op whose pointer lies outside its buffers) and what a test harness
// moves to a device before the op runs. for_each_pointer(p, f) calls f(field, pointer) with a reference
// to each pointer member (a CacheView's base as "<view>.base"); null pointers are visited too.
//
// Kept beside nothing else on purpose: one list per params struct, checked against the struct's size,
// so a pointer added to a params struct without a line here fails to compile (update both together).
#pragma once

#include <string_view>

#include "sieve/ops/cache_store.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/linear.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve {

namespace op_pointers_detail {
template <typename F>
void view(std::string_view name, CacheView& v, F& f) {
    f(name, v.base);
}
template <typename F>
void tables(BlockTables& t, F& f) {
    f("tables.block_table", t.block_table);
    f("tables.token_request", t.token_request);
}
}  // namespace op_pointers_detail

// The sizes on LP64 (x86-64, aarch64) when each list below was written: a new field changes the size.
#define SIEVE_OP_POINTERS(Params, bytes, ...)                                                         \
    static_assert(sizeof(void*) != 8 || sizeof(Params) == (bytes),                                    \
                  #Params " changed: update its pointer list in ops/op_pointers.h, then this size"); \
    template <typename F>                                                                             \
    void for_each_pointer(Params& p, F&& f) {                                                         \
        using namespace op_pointers_detail;                                                           \
        __VA_ARGS__;                                                                                  \
    }

SIEVE_OP_POINTERS(LinearParams, 48, f("x", p.x); f("y", p.y))
SIEVE_OP_POINTERS(RmsNormParams, 88, f("x", p.x); f("y", p.y); f("weight", p.weight))
SIEVE_OP_POINTERS(LayerNormParams, 96, f("x", p.x); f("y", p.y); f("weight", p.weight); f("bias", p.bias))
SIEVE_OP_POINTERS(RopeParams, 112, f("x", p.x); f("y", p.y); f("positions", p.positions);
                  f("inv_freq", p.inv_freq))
SIEVE_OP_POINTERS(QuantFp8Params, 144, f("x", p.x); f("q", p.q); f("scale_ue8m0", p.scale_ue8m0);
                  f("scale_f32", p.scale_f32); f("dequant", p.dequant))
SIEVE_OP_POINTERS(HadamardParams, 80, f("x", p.x); f("y", p.y))
SIEVE_OP_POINTERS(CacheStoreParams, 120, f("x", p.x); f("slots", p.slots); view("cache.base", p.cache, f))
SIEVE_OP_POINTERS(SelectedSlotsParams, 120, f("selected", p.selected); f("n_scored", p.n_scored);
                  f("positions", p.positions); f("slots", p.slots); tables(p.tables, f))
SIEVE_OP_POINTERS(TopkParams, 72, f("scores", p.scores); f("valid_len", p.valid_len); f("out", p.out);
                  f("out_count", p.out_count))
SIEVE_OP_POINTERS(DsaOutputGateParams, 96, f("x", p.x); f("gate", p.gate); f("y", p.y))
SIEVE_OP_POINTERS(MlaHeadProjParams, 96, f("x", p.x); f("w", p.w); f("y", p.y))
SIEVE_OP_POINTERS(KvLoadParams, 96, f("slots", p.slots); f("y", p.y); view("cache.base", p.cache, f))
SIEVE_OP_POINTERS(CompressorStateStoreParams, 112, f("kv", p.kv); f("gate", p.gate); f("ape", p.ape);
                  f("positions", p.positions); f("slots", p.slots); view("state.base", p.state, f))
SIEVE_OP_POINTERS(CompressorPoolParams, 96, f("gather_slots", p.gather_slots); f("out", p.out);
                  view("state.base", p.state, f))
SIEVE_OP_POINTERS(IndexerScoresParams, 232, f("q", p.q); f("q_scale", p.q_scale); f("weights", p.weights);
                  f("n_keys", p.n_keys); f("scores", p.scores); f("selected", p.selected);
                  view("keys.base", p.keys, f); tables(p.tables, f))
SIEVE_OP_POINTERS(SparseAttentionParams, 256, f("q", p.q); f("main.slots", p.main.slots);
                  f("extra.slots", p.extra.slots); f("sink", p.sink); f("out", p.out);
                  view("main.cache.base", p.main.cache, f); view("extra.cache.base", p.extra.cache, f))
SIEVE_OP_POINTERS(QsaPoolParams, 88, f("member_slots", p.member_slots); f("out", p.out); view("keys.base", p.keys, f))
SIEVE_OP_POINTERS(QsaExpandParams, 88, f("sel", p.sel); f("positions", p.positions); f("seq_lens", p.seq_lens);
                  f("out", p.out); f("out_count", p.out_count))
SIEVE_OP_POINTERS(QsaSparseGqaParams, 208, f("q", p.q); f("indices", p.indices); f("gate", p.gate);
                  f("out", p.out); view("kv.base", p.kv, f); tables(p.tables, f))

#undef SIEVE_OP_POINTERS

// Read-only visiting of const params (f must not assign through the reference).
template <typename Params, typename F>
void for_each_pointer(const Params& p, F&& f) {
    for_each_pointer(const_cast<Params&>(p), f);
}

}  // namespace sieve

// Bindings of the attention path over paged caches: cache_store (ops/cache_store.h), sparse_attention
// (ops/sparse_attention.h) and indexer_scores with its fused top-k (ops/indexer_scores.h). A cache is
// a tensor whose first dimension counts blocks (tensor_arg.h PagedCache); slot lists and block tables are
// int32 (python/sieve/ops.py converts vLLM's int64 slot lists).
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "errors.h"
#include "op_backend.h"
#include "ops_bindings.h"
#include "sieve/ops/attention_math.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/sparse_attention.h"
#include "tensor_arg.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

void cache_store(const Array& x_array, const Array& cache_array, const Array& slots_array, int64_t block_size,
                 const std::string& format, int64_t dim, int64_t rope_dim, int64_t entry_offset, bool round_bf16) {
    const char* op = "cache_store";
    const TensorArg x(op, "x", x_array), cache(op, "kv_cache", cache_array), slots(op, "slot_mapping", slots_array);
    x.expect_host();
    slots.expect_host();
    x.expect_dtype({DType::f32, DType::bf16}).expect_shape({-1, -1}, "n_rows, dim").expect_rows_contiguous();
    slots.expect_dtype({DType::i32}).expect_shape({x.dim(0)}, "n_rows").expect_contiguous();
    const CacheRecordLayout layout{parse_cache_format(op, format), dim, rope_dim};
    const PagedCache pc = paged_cache(cache, block_size, layout);
    CacheStoreParams p = whole_row_store(x.data(), x.dtype(), x.stride(0), x.dim(0),
                                         static_cast<const int32_t*>(slots.data()), pc.view, pc.n_slots(), layout);
    p.dim = x.dim(1);
    p.entry_offset = entry_offset;
    p.round_bf16 = round_bf16;
    run_op([&](Backend& b, const auto&) { return b.cache_store(p); });
}

AttentionMath parse_attention_math(const std::string& s) {
    if (s == "f32") return AttentionMath::f32;
    if (s == "bf16") return AttentionMath::bf16;
    throw StatusError(invalid_argument_error(
        "sieve.ops.sparse_attention: math '{}', expected 'f32' (exact) or 'bf16' (deployed)", s));
}

SparseKvList kv_list(const char* op, const char* cache_name, const Array& cache_array, const char* slots_name,
                     const Array& slots_array, int64_t block_size, CacheRecordFormat format, int64_t qk_dim,
                     int64_t rope_dim, int64_t n_tokens) {
    const TensorArg cache(op, cache_name, cache_array), slots(op, slots_name, slots_array);
    slots.expect_host();
    slots.expect_dtype({DType::i32}).expect_shape({n_tokens, -1}, "n_tokens, width").expect_rows_contiguous();
    const PagedCache pc = paged_cache(cache, block_size, CacheRecordLayout{format, qk_dim, rope_dim});
    SparseKvList l;
    l.cache = pc.view;
    l.format = format;
    l.n_slots = pc.n_slots();
    l.slots = static_cast<const int32_t*>(slots.data());
    l.width = slots.dim(1);
    l.slots_stride = slots.stride(0);
    return l;
}

void sparse_attention(const Array& out_array, const Array& q_array, const Array& cache_array, const Array& slots_array,
                      int64_t block_size, std::optional<Array> extra_cache_array, std::optional<Array> extra_slots_array,
                      int64_t extra_block_size, std::optional<Array> sink_array, float scale, const std::string& format,
                      int64_t rope_dim, int64_t v_dim, const std::string& math) {
    const char* op = "sparse_attention";
    const TensorArg q(op, "q", q_array), out(op, "out", out_array);
    q.expect_host();
    out.expect_host();
    q.expect_dtype({DType::f32, DType::bf16}).expect_shape({-1, -1, -1}, "n_tokens, n_heads, qk_dim").expect_rows_contiguous();
    out.expect_dtype({DType::f32, DType::bf16}).expect_shape({q.dim(0), q.dim(1), v_dim}, "n_tokens, n_heads, v_dim").expect_rows_contiguous();
    const CacheRecordFormat f = parse_cache_format(op, format);
    SparseAttentionParams p;
    p.q = q.data();
    p.out = out.data();
    p.n_tokens = q.dim(0);
    p.n_heads = q.dim(1);
    p.qk_dim = q.dim(2);
    p.v_dim = v_dim;
    p.rope_dim = rope_dim;
    p.q_token_stride = q.stride(0);
    p.q_head_stride = q.stride(1);
    p.out_token_stride = out.stride(0);
    p.out_head_stride = out.stride(1);
    p.q_type = q.dtype();
    p.out_type = out.dtype();
    p.scale = scale;
    p.math = parse_attention_math(math);
    p.main = kv_list(op, "kv_cache", cache_array, "slots", slots_array, block_size, f, p.qk_dim, rope_dim, p.n_tokens);
    if (extra_cache_array.has_value() != extra_slots_array.has_value())
        throw StatusError(invalid_argument_error("sieve.ops.sparse_attention: extra_kv_cache and extra_slots come together"));
    if (extra_cache_array)
        p.extra = kv_list(op, "extra_kv_cache", *extra_cache_array, "extra_slots", *extra_slots_array, extra_block_size, f,
                          p.qk_dim, rope_dim, p.n_tokens);
    if (sink_array) {
        const TensorArg sink(op, "sink", *sink_array);
        sink.expect_host();
        sink.expect_dtype({DType::f32}).expect_shape({p.n_heads}, "n_heads").expect_contiguous();
        p.sink = static_cast<const float*>(sink.data());
    }
    run_op([&](Backend& b, const auto& workspace) {
        return b.sparse_attention(p, workspace(b.sparse_attention_workspace_size(p)));
    });
}

void indexer_scores(const Array& q_array, const Array& cache_array, const Array& block_table_array,
                    const Array& token_request_array, const Array& n_keys_array, int64_t block_size,
                    const std::string& key_format, std::optional<Array> q_scale_array, std::optional<Array> weights_array,
                    float weight_scale, std::optional<Array> scores_array, std::optional<Array> selected_array) {
    const char* op = "indexer_scores";
    const TensorArg q(op, "q", q_array), cache(op, "k_cache", cache_array), table(op, "block_table", block_table_array),
        token_request(op, "token_request", token_request_array), n_keys(op, "n_keys", n_keys_array);
    for (const TensorArg* t : {&q, &table, &token_request, &n_keys}) t->expect_host();
    q.expect_dtype({DType::f32, DType::bf16, DType::f8_e4m3}).expect_shape({-1, -1, -1}, "n_tokens, n_heads, head_dim").expect_rows_contiguous();
    const int64_t n_tokens = q.dim(0), n_heads = q.dim(1);
    table.expect_dtype({DType::i32}).expect_shape({-1, -1}, "n_requests, max_blocks").expect_contiguous();
    token_request.expect_dtype({DType::i32}).expect_shape({n_tokens}, "n_tokens").expect_contiguous();
    n_keys.expect_dtype({DType::i32}).expect_shape({n_tokens}, "n_tokens").expect_contiguous();
    IndexerScoresParams p;
    p.q = q.data();
    p.q_type = q.dtype();
    p.n_tokens = n_tokens;
    p.n_heads = n_heads;
    p.head_dim = q.dim(2);
    p.q_token_stride = q.stride(0);
    p.q_head_stride = q.stride(1);
    p.key_format = parse_cache_format(op, key_format);
    const PagedCache pc = paged_cache(cache, block_size, p.key_layout());
    p.keys = pc.view;
    p.n_slots = pc.n_slots();
    p.tables = BlockTables{static_cast<const int32_t*>(table.data()), static_cast<const int32_t*>(token_request.data()),
                           table.dim(0), table.dim(1)};
    p.n_keys = static_cast<const int32_t*>(n_keys.data());
    p.weight_scale = weight_scale;
    // q_scale and weights: optional f32 [n_tokens, n_heads] rows.
    const auto per_head = [&](const char* name, const std::optional<Array>& array, const float*& data, int64_t& stride) {
        if (!array) return;
        const TensorArg t(op, name, *array);
        t.expect_host();
        t.expect_dtype({DType::f32}).expect_shape({n_tokens, n_heads}, "n_tokens, n_heads").expect_rows_contiguous();
        data = static_cast<const float*>(t.data());
        stride = t.stride(0);
    };
    per_head("q_scale", q_scale_array, p.q_scale, p.q_scale_token_stride);
    per_head("weights", weights_array, p.weights, p.weights_token_stride);
    if (scores_array) {
        const TensorArg s(op, "scores", *scores_array);
        s.expect_host();
        s.expect_dtype({DType::f32}).expect_shape({n_tokens, -1}, "n_tokens, n_cols").expect_rows_contiguous();
        p.scores = static_cast<float*>(s.data());
        p.n_cols = s.dim(1);
        p.scores_row_stride = s.stride(0);
    }
    if (selected_array) {
        const TensorArg s(op, "selected", *selected_array);
        s.expect_host();
        s.expect_dtype({DType::i32}).expect_shape({n_tokens, -1}, "n_tokens, k").expect_rows_contiguous();
        p.selected = static_cast<int32_t*>(s.data());
        p.k = s.dim(1);
        p.selected_row_stride = s.stride(0);
        if (!scores_array) p.n_cols = table.dim(1) * block_size;  // every entry a row of the table can address
    }
    run_op([&](Backend& b, const auto& workspace) {
        return b.indexer_scores(p, workspace(b.indexer_scores_workspace_size(p)));
    });
}

}  // namespace

void bind_attention_ops(nb::module_& ops) {
    ops.def("cache_store", &cache_store, nb::arg("x"), nb::arg("kv_cache"), nb::arg("slot_mapping"), nb::arg("block_size"),
            nb::arg("format"), nb::arg("dim"), nb::arg("rope_dim"), nb::arg("entry_offset"), nb::arg("round_bf16"));
    ops.def("sparse_attention", &sparse_attention, nb::arg("out"), nb::arg("q"), nb::arg("kv_cache"), nb::arg("slots"),
            nb::arg("block_size"), nb::arg("extra_kv_cache").none(), nb::arg("extra_slots").none(),
            nb::arg("extra_block_size"), nb::arg("sink").none(), nb::arg("scale"), nb::arg("format"),
            nb::arg("rope_dim"), nb::arg("v_dim"), nb::arg("math"));
    ops.def("indexer_scores", &indexer_scores, nb::arg("q"), nb::arg("k_cache"), nb::arg("block_table"),
            nb::arg("token_request"), nb::arg("n_keys"), nb::arg("block_size"), nb::arg("key_format"),
            nb::arg("q_scale").none(), nb::arg("weights").none(), nb::arg("weight_scale"), nb::arg("scores").none(),
            nb::arg("selected").none());
}

}  // namespace sieve::python

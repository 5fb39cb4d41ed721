// The step's scratch of the DeepSeek-V4 model: one arena in backend memory that every layer carves into
// the same named sub-buffers (activations, selection rows, slot lists, the op workspace). plan_step counts
// the largest layer's bytes and reserves them once per step (DESIGN.md: one workspace arena per step, sized
// by a counting pass), so nothing grows in the middle of a forward; layers run one after another and nothing
// in the arena survives a forward. Plus the host copies of a selection that an observer reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sieve/core/dtype.h"
#include "models/workspace_buffer.h"

namespace sieve::dsv4 {

// Element counts of one layer's sub-buffers for one step ("act": f32 in exact, bf16 in deployed). N = tokens
// of the step, E = entries a compressor completes in it; a count of 0 is a buffer the layer does not use.
struct ScratchShape {
    DType act = DType::f32;
    int64_t n_tokens = 0;           // N
    int64_t q_rank = 0;             // q_lora_rank
    int64_t heads = 0, head_dim = 0;
    int64_t norm_tokens = 0;        // tokens whose head-normed queries share one fp32 buffer
    int64_t out_rank = 0;           // G·o_lora_rank
    int64_t compressor_floats = 0;  // the largest compressor's N·2·coff·c
    int64_t pooled_floats = 0;      // the largest compressor's E·c
    int64_t index_weights = 0;      // N·H_I (scored CSA steps)
    int64_t index_queries = 0;      // N·H_I·c_I (scored CSA steps)
    int64_t scores = 0;             // N·max_keys (scored CSA steps an observer reads)
    int64_t selected = 0;           // N·W (CSA)
    int64_t compressed_slots = 0;   // N·n_compressed (CSA, HCA)
    size_t op_workspace = 0;        // the largest workspace of the layer's ops
};

// One layer's sub-buffers (device memory; null while counting).
struct LayerScratch {
    void* qa = nullptr;                  // [N, q_lora_rank] act: wq_a output
    void* qr = nullptr;                  // [N, q_lora_rank] act: q_norm output, also the indexer's input
    void* q = nullptr;                   // [N, H, d] act: wq_b output, then rotated queries
    float* q32 = nullptr;                // [norm_tokens, H, d] f32: head-normed queries of a few tokens
    void* kv_raw = nullptr;              // [N, d] act: wkv output
    void* kv = nullptr;                  // [N, d] act: normed and rotated K = V rows
    float* comp = nullptr;               // [N, 2·coff·c] f32: a compressor's a_s | b_s
    float* pooled = nullptr;             // [E, c] f32
    float* index_w = nullptr;            // [N, H_I] f32
    void* index_q = nullptr;             // [N, H_I, c_I] act
    float* scores = nullptr;             // [N, max_keys] f32
    int32_t* selected = nullptr;         // [N, W] request-local entries, ascending then −1
    int32_t* compressed_slots = nullptr; // [N, n_compressed] compressed-cache slots each token reads
    void* o = nullptr;                   // [N, H, d] act: attention output
    void* z = nullptr;                   // [N, G·o_lora_rank] act
    Workspace op;                        // every op's workspace (op_workspace bytes)
};

// The sub-buffers of `shape`, in one fixed order: the counting pass and the forward take the same.
inline LayerScratch carve_layer_scratch(WorkspaceCarver& c, const ScratchShape& s) {
    const size_t act = dtype_size(s.act);
    const auto n = [](int64_t count) { return static_cast<size_t>(count); };
    LayerScratch b;
    b.qa = c.take_bytes(n(s.n_tokens * s.q_rank) * act);
    b.qr = c.take_bytes(n(s.n_tokens * s.q_rank) * act);
    b.q = c.take_bytes(n(s.n_tokens * s.heads * s.head_dim) * act);
    b.q32 = c.take<float>(n(s.norm_tokens * s.heads * s.head_dim));
    b.kv_raw = c.take_bytes(n(s.n_tokens * s.head_dim) * act);
    b.kv = c.take_bytes(n(s.n_tokens * s.head_dim) * act);
    b.comp = c.take<float>(n(s.compressor_floats));
    b.pooled = c.take<float>(n(s.pooled_floats));
    b.index_w = c.take<float>(n(s.index_weights));
    b.index_q = c.take_bytes(n(s.index_queries) * act);
    b.scores = c.take<float>(n(s.scores));
    b.selected = c.take<int32_t>(n(s.selected));
    b.compressed_slots = c.take<int32_t>(n(s.compressed_slots));
    b.o = c.take_bytes(n(s.n_tokens * s.heads * s.head_dim) * act);
    b.z = c.take_bytes(n(s.n_tokens * s.out_rank) * act);
    b.op = c.take_workspace(s.op_workspace);
    return b;
}

// The bytes of carve_layer_scratch(shape): the counting pass.
inline size_t layer_scratch_bytes(const ScratchShape& shape) {
    WorkspaceCarver counting;
    carve_layer_scratch(counting, shape);
    return counting.offset;
}

struct Scratch {
    WorkspaceBuffer arena;  // the step's sub-buffers (carve_layer_scratch), in backend memory
    // Host copies of a CSA selection for the SelectionObserver (the one sanctioned readback).
    std::vector<int32_t> observed_rows;   // [N, W]
    std::vector<float> observed_scores;   // [N, max_keys]

    // Bytes held (`sieve run`'s memory report).
    int64_t bytes() const {
        return static_cast<int64_t>(arena.capacity() + observed_rows.capacity() * sizeof(int32_t) +
                                    observed_scores.capacity() * sizeof(float));
    }
};

}  // namespace sieve::dsv4

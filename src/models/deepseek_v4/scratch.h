// Per-step scratch memory of the DeepSeek-V4 model: named buffers that grow to the largest step and
// are shared by every layer (they run one after another), plus the op workspace. Nothing here
// survives a forward call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/allocation.h"
#include "models/workspace_buffer.h"

namespace sieve::dsv4 {

// Activation buffers ("act": f32 in exact, bf16 in deployed) are float vectors sized to their bytes
// (AttentionLayer::act_buffer). N = tokens of the step, E = entries the step completes.
struct Scratch {
    std::vector<float> qa, qr;        // [N, q_lora_rank] act
    std::vector<float> q;             // [N, H, d] act: wq_b output, rotated queries, then o grouped for wo_a
    std::vector<float> q32;           // [16, H, d] f32: head-normed queries of a few tokens
    std::vector<float> kv;            // [2, N, d] act: wkv output, normed + rotated rows
    std::vector<float> comp;          // [N, 2·coff·c] f32: compressor a_s | b_s
    std::vector<float> pooled;        // [E, c] f32
    std::vector<float> index_q;       // [N, H_I, c_I] act
    std::vector<float> index_w;       // [N, H_I] f32
    std::vector<float> scores;        // [N, max_keys] f32
    std::vector<float> o;             // [N, H, d] act
    std::vector<float> z;             // [N, G·o_lora_rank] act
    std::vector<int32_t> swa_slots, state_slots;  // [N]
    std::vector<int32_t> window;      // [N, window width]: min(sliding_window, positions a token sees)
    std::vector<int32_t> gather;      // [E, coff·m]
    std::vector<int32_t> entry_slots;  // [E]
    std::vector<int32_t> comp_list;   // [N, n_compressed]
    std::vector<int32_t> key_slots;   // [n_requests, max_keys]
    std::vector<int32_t> n_keys;      // [N]
    std::vector<int32_t> selected;    // [N, top-k width]: min(index_topk, entries a token sees)
    std::vector<int64_t> entry_positions;  // [E]
    WorkspaceBuffer workspace;  // op workspaces (linear, top-k, indexer scores, sparse attention)

    // Bytes held by every buffer (`sieve run`'s memory report).
    int64_t bytes() const {
        int64_t b = static_cast<int64_t>(workspace.capacity());
        for (const auto* v : {&qa, &qr, &q, &q32, &kv, &comp, &pooled, &index_q, &index_w, &scores, &o, &z})
            b += static_cast<int64_t>(v->capacity() * sizeof(float));
        for (const auto* v : {&swa_slots, &state_slots, &window, &gather, &entry_slots, &comp_list, &key_slots, &n_keys,
                              &selected})
            b += static_cast<int64_t>(v->capacity() * sizeof(int32_t));
        return b + static_cast<int64_t>(entry_positions.capacity() * sizeof(int64_t));
    }
};

// v grown to at least n elements, or out_of_memory naming the bytes and `what` (models/allocation.h).
template <typename T>
Expected<T*> sized(std::vector<T>& v, int64_t n, std::string_view what) {
    return scratch_at_least(v, n, what);
}

}  // namespace sieve::dsv4

// Per-step scratch memory of the DeepSeek-V4 model: named buffers that grow to the largest step and
// are shared by every layer (they run one after another), plus the op workspace. Nothing here
// survives a forward call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace sieve::dsv4 {

// A 64-byte aligned byte buffer that only grows.
class AlignedBuffer {
public:
    void* get(size_t bytes) {
        if (bytes > capacity_) {
            const size_t rounded = (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
            data_.reset(static_cast<uint8_t*>(std::aligned_alloc(kWorkspaceAlignment, rounded)));
            capacity_ = data_ ? rounded : 0;
        }
        return data_.get();
    }
    Workspace workspace(size_t bytes) { return Workspace{bytes ? get(bytes) : nullptr, bytes}; }

private:
    struct Free {
        void operator()(uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<uint8_t, Free> data_;
    size_t capacity_ = 0;
};

// Activation buffers ("act": f32 in exact, bf16 in deployed) are sized in elements of 4 bytes, bf16
// activations use half of each. N = tokens of the step, E = entries the step completes.
struct Scratch {
    std::vector<float> qa, qr;        // [N, q_lora_rank] act
    std::vector<float> q, q32;        // [N, H, d] act (wq_b output), f32 (head-normed)
    std::vector<float> kv;            // [2, N, d] act: wkv output, normed + rotated rows
    std::vector<float> comp;          // [N, 2·coff·c] f32: compressor a_s | b_s
    std::vector<float> pooled;        // [E, c] f32
    std::vector<float> index_q;       // [N, H_I, c_I] act
    std::vector<float> index_w;       // [N, H_I] f32
    std::vector<float> scores;        // [N, max_keys] f32
    std::vector<float> o;             // [N, H, d] act
    std::vector<float> og;            // [G, N, (H/G)·d] act: o de-rotated, grouped for wo_a
    std::vector<float> z;             // [N, G·o_lora_rank] act
    std::vector<int32_t> swa_slots, state_slots;  // [N]
    std::vector<int32_t> window;      // [N, sliding_window]
    std::vector<int32_t> gather;      // [E, coff·m]
    std::vector<int32_t> entry_slots;  // [E]
    std::vector<int32_t> comp_list;   // [N, n_compressed]
    std::vector<int32_t> key_slots;   // [n_requests, max_keys]
    std::vector<int32_t> n_keys;      // [N]
    std::vector<int32_t> selected;    // [N, index_topk]
    std::vector<int64_t> entry_positions;  // [E]
    AlignedBuffer workspace;  // op workspaces (linear, top-k, indexer scores, sparse attention)
};

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v.data();
}

}  // namespace sieve::dsv4

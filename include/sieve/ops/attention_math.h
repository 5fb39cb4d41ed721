// ops/attention_math.h — the arithmetic of an attention op's P·V product, shared by the attention contracts
// (ops/sparse_attention.h, ops/qsa_sparse_gqa.h): each says what its weights are under each value.
//   f32   the softmax weights p_j enter P·V as they are (`exact` profile)
//   bf16  they are rounded to bf16 first, their sum Σ p_j is not (`deployed`: FlashMLA, vLLM and the model
//         authors' kernels cast P to bf16 for the P·V product; deepseek_v4.md §3.8, qsa.md §9 item 5)
#pragma once

#include <cstdint>
#include <string_view>

namespace sieve {

enum class AttentionMath : uint8_t { f32, bf16 };

constexpr std::string_view attention_math_name(AttentionMath m) {
    switch (m) {
        case AttentionMath::f32: return "f32";
        case AttentionMath::bf16: return "bf16";
    }
    return "?";
}

}  // namespace sieve

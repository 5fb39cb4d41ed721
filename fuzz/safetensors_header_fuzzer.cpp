// libFuzzer target: the safetensors header parser (and the index parser) on arbitrary bytes.
// Any input must give a header or a Status; views of the tensors it accepts must lie inside the
// input, and converting them must not read outside it (ASan checks both).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/assert.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::span<const uint8_t> bytes(data, size);
    auto header = sieve::parse_safetensors_header(bytes, "fuzz.safetensors");
    if (header.has_value()) {
        for (const auto& info : header->tensors) {
            const auto view = sieve::safetensors_tensor_view(*header, info, bytes, "fuzz.safetensors");
            SIEVE_ASSERT(view.bytes.data() >= data && view.bytes.data() + view.bytes.size() <= data + size,
                         "tensor view outside the input");
            if (!view.is_opaque()) {
                auto f32 = sieve::read_tensor(view, sieve::DType::f32);
                SIEVE_ASSERT(f32.has_value(), "a validated tensor must convert");
            }
        }
    }
    // The index parser sees the same bytes as JSON text.
    (void)sieve::parse_safetensors_index(bytes, "fuzz.index.json");
    return 0;
}

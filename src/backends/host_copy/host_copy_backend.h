// host-copy: a device whose memory host code cannot touch, to prove that no code outside a backend
// reads or writes device memory and that ops get only device memory (what a GPU backend needs).
//
//   * Its buffers are separate page-aligned mappings that stay PROT_NONE except while this backend
//     itself moves bytes (upload / download / copy / fill) or runs an op: host code that dereferences
//     a buffer's address faults at once.
//   * Every pointer in an op's params (ops/op_pointers.h) and every workspace must lie inside one of
//     its live buffers, or be null: a host address is invalid_argument naming the op and the field.
//     linear_prepare is the exception by contract: it reads host weights at load (backend.h).
//   * The ops themselves run on an inner host backend (ref, or a cpu variant) over the same bytes, so
//     results equal the inner backend's bit for bit.
//
// Specs: "host-copy" (over ref) or "host-copy:<inner spec>", e.g. "host-copy:cpu:avx2".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"

namespace sieve {

inline constexpr std::string_view kHostCopyBackendSpecs = "host-copy or host-copy:<ref or a cpu spec>";

Expected<std::unique_ptr<Backend>> make_host_copy_backend(std::unique_ptr<Backend> inner);
Expected<std::unique_ptr<Backend>> make_host_copy_backend_from_spec(std::string_view spec);
std::vector<std::string> host_copy_backend_variants();

}  // namespace sieve

// The ref backend's QSA ops (ops/qsa_pool.h, qsa_expand.h, qsa_sparse_gqa.h): scalar,
// written to read like the contracts. Internal to backends/ref.
#pragma once

#include "sieve/core/status.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::ref {

Status qsa_pool(const QsaPoolParams& p);
Status qsa_expand(const QsaExpandParams& p);
Status qsa_sparse_gqa(const QsaSparseGqaParams& p);

}  // namespace sieve::ref

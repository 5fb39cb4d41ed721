// `sieve bench`: measures this machine's ceilings (memory bandwidth, fp32 FMA and bf16 dot peaks,
// one core and all cores) and reports them with their run-to-run spread.
#pragma once

#include <iosfwd>

#include "core/status.h"

namespace sieve::cli {

struct BenchOptions {
    bool quick = false;
    bool json = false;
};

Status run_bench(const BenchOptions& options, std::ostream& out);

}  // namespace sieve::cli

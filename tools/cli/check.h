// `sieve check <fixture-dir>`: a golden fixture through the runtime, per-layer agreement report.
#pragma once

#include <filesystem>
#include <iosfwd>

#include "core/status.h"
#include "golden_check.h"

namespace sieve::cli {

struct CheckCommandOptions {
    std::filesystem::path fixture;
    CheckOptions check;
    bool json = false;
};

// Prints the report; an error when the fixture cannot be run or any layer is out of tolerance.
Status run_check(const CheckCommandOptions& options, std::ostream& out);

}  // namespace sieve::cli

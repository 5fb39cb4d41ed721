// `sieve check <fixture-dir>`: a golden fixture through the runtime, per-layer agreement report.
#pragma once

#include <filesystem>
#include <iosfwd>

#include "sieve/core/status.h"
#include "golden_check.h"

namespace sieve::cli {

struct CheckCommandOptions {
    std::filesystem::path fixture;
    CheckOptions check;
    // false: the profile's default for the fixture's model type (default_check_tolerances).
    bool tolerance_given = false;
    bool agreement_given = false;
    bool json = false;
};

// Prints the report and returns whether every layer is within tolerance; an error when the fixture
// cannot be run.
Expected<bool> run_check(const CheckCommandOptions& options, std::ostream& out);

}  // namespace sieve::cli

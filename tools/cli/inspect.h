// `sieve inspect <checkpoint-dir> [--json]`: what a checkpoint holds for sieve's attention layers.
#pragma once

#include <filesystem>
#include <iosfwd>

#include "sieve/core/status.h"

namespace sieve::cli {

struct InspectOptions {
    std::filesystem::path checkpoint;  // a directory with config.json and *.safetensors
    bool json = false;
};

// Writes the report to `out`. Returns an error when the checkpoint cannot be read or does not match
// its config (a missing tensor, a wrong shape or dtype); the report is still written first, so the
// user sees every problem at once.
Status run_inspect(const InspectOptions& options, std::ostream& out);

}  // namespace sieve::cli

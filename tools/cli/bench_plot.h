// The plot of `sieve bench --svg`: decode step time against context length at batch 1, one panel
// per preset, one line per layer, sparse (solid) against sieve's own dense attention (dashed), both
// axes logarithmic. Plain SVG, no dependency.
#pragma once

#include <string>
#include <vector>

#include "bench_layers.h"

namespace sieve::cli {

std::string decode_plot_svg(const std::vector<LayerPoint>& points, const std::string& isa, int threads);

}  // namespace sieve::cli

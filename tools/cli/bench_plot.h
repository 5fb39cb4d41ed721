// The plot of `sieve bench --svg`: decode step time per layer against context, both axes
// logarithmic, in a grid of panels: a column per preset, a row per batch size swept (smallest
// first). A panel has a line per layer, sparse (solid) against sieve's own dense attention (dashed,
// where it ran), and rings the points that look timed under load. The title sits above the grid,
// each column's legend below it, so that neither covers a curve. Plain SVG, no dependency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_layers.h"

namespace sieve::cli {

struct PlotBox {
    double x = 0, y = 0, w = 0, h = 0;  // top-left corner and size, in SVG user units (pixels)
};

// The SVG and the boxes it was laid out with (text boxes are estimated from the font size).
struct DecodePlot {
    std::string svg;
    PlotBox canvas;
    PlotBox title;                    // both title lines
    std::vector<PlotBox> plot_areas;  // one per panel: the axes' frame, where the curves are drawn
    std::vector<PlotBox> labels;      // the panels' headers and axis titles
    std::vector<PlotBox> legends;     // one per column
    std::vector<int64_t> batches;     // the rows
};

// The decode points of `isa` at `threads` threads at the sweep's batch sizes (a comparison point
// that the sweep adds at batch 1 makes no row of its own).
DecodePlot decode_plot(const std::vector<LayerPoint>& points, const std::string& isa, int threads,
                       const std::vector<int64_t>& swept_batches);

}  // namespace sieve::cli

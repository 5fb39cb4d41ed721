#include "bench_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace sieve::cli {

namespace {

constexpr double kPanelW = 360, kPanelH = 280, kLeft = 56, kRight = 12, kTop = 36, kBottom = 44;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

}  // namespace

std::string decode_plot_svg(const std::vector<LayerPoint>& points, const std::string& isa, int threads) {
    // preset → layer → variant → context → seconds
    std::map<std::string, std::map<int64_t, std::map<std::string, std::map<int64_t, double>>>> series;
    std::map<std::string, std::map<int64_t, std::string>> kinds;
    std::vector<std::string> order;
    for (const LayerPoint& p : points) {
        if (p.phase != "decode" || p.batch != 1 || p.isa != isa || p.threads != threads) continue;
        if (!series.count(p.preset)) order.push_back(p.preset);
        series[p.preset][p.layer][p.variant][p.context] = p.seconds;
        kinds[p.preset][p.layer] = p.kind;
    }
    const double width = kPanelW * static_cast<double>(std::max<size_t>(order.size(), 1));
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
        "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        width, kPanelH + 20);
    svg += fmt::format("<text x=\"8\" y=\"14\" font-size=\"12\">sieve bench: decode step time per layer vs context, "
                       "batch 1, {}, {} thread(s); solid = sparse, dashed = dense</text>\n",
                       isa, threads);
    for (size_t panel = 0; panel < order.size(); ++panel) {
        const auto& layers = series[order[panel]];
        double x_lo = 1e300, x_hi = 0, y_lo = 1e300, y_hi = 0;
        for (const auto& [layer, variants] : layers)
            for (const auto& [variant, line] : variants)
                for (const auto& [ctx, s] : line) {
                    x_lo = std::min(x_lo, std::log2(static_cast<double>(ctx)));
                    x_hi = std::max(x_hi, std::log2(static_cast<double>(ctx)));
                    y_lo = std::min(y_lo, std::log10(1e3 * s));
                    y_hi = std::max(y_hi, std::log10(1e3 * s));
                }
        if (x_hi <= x_lo) x_hi = x_lo + 1;
        y_lo = std::floor(y_lo);
        y_hi = std::max(std::ceil(y_hi), y_lo + 1);
        const double x0 = kPanelW * static_cast<double>(panel) + kLeft, x1 = kPanelW * static_cast<double>(panel + 1) - kRight;
        const double y0 = 20 + kTop, y1 = 20 + kPanelH - kBottom;
        auto px = [&](double lx) { return x0 + (lx - x_lo) / (x_hi - x_lo) * (x1 - x0); };
        auto py = [&](double ly) { return y1 - (ly - y_lo) / (y_hi - y_lo) * (y1 - y0); };
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n", x0, y0 - 10, order[panel]);
        svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
                           "stroke=\"#888\"/>\n",
                           x0, y0, x1 - x0, y1 - y0);
        for (double e = y_lo; e <= y_hi + 1e-9; e += 1)
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g} ms</text>\n", x0 - 4, py(e) + 4,
                               std::pow(10.0, e));
        for (double e = std::ceil(x_lo); e <= x_hi + 1e-9; e += 1)
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}K</text>\n", px(e), y1 + 14,
                               std::pow(2.0, e) / 1024);
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">context (tokens)</text>\n",
                           (x0 + x1) / 2, y1 + 30);
        size_t color = 0;
        double legend_y = y0 + 12;
        for (const auto& [layer, variants] : layers) {
            const char* c = kColors[color++ % std::size(kColors)];
            for (const auto& [variant, line] : variants) {
                std::string pts;
                for (const auto& [ctx, s] : line)
                    pts += fmt::format("{:.1f},{:.1f} ", px(std::log2(static_cast<double>(ctx))), py(std::log10(1e3 * s)));
                svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", pts, c,
                                   variant == "dense" ? " stroke-dasharray=\"6,4\"" : "");
            }
            svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">layer {} ({})</text>\n", x0 + 6, legend_y, c,
                               layer, kinds[order[panel]][layer]);
            legend_y += 13;
        }
    }
    svg += "</svg>\n";
    return svg;
}

}  // namespace sieve::cli

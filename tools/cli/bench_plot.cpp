#include "bench_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace sieve::cli {

namespace {

constexpr double kFont = 11, kTitleFont = 13;
// A text box is estimated at 0.6 em per character, wider than the average glyph of the usual
// sans-serif faces (about 0.5 em), so that the box holds the text in whichever face draws it; its
// height is 1.25 em from the top of the tallest glyphs to the bottom of the descenders.
constexpr double kEm = 0.6, kLineHeight = 1.25;
constexpr double kMargin = 12;
constexpr double kYAxisW = 64;   // left of a plot area: the rotated axis title and the tick labels
constexpr double kPlotW = 300, kPlotH = 200;
constexpr double kHeaderH = 20;  // above a plot area: the panel's header
constexpr double kXAxisH = 40;   // below: the tick labels and the axis title
constexpr double kGapW = 24;     // between columns
constexpr double kGapH = 8;      // between rows
constexpr double kLegendRow = 15, kLegendSample = 22;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

double text_width(const std::string& s, double font) {
    double chars = 0;
    for (unsigned char c : s) chars += (c & 0xC0) != 0x80;  // UTF-8: count code points, not bytes
    return kEm * font * chars;
}

// The box of a line of text whose baseline starts at (x, baseline), or is centred on x, or ends there.
enum class Anchor { start, middle, end };
PlotBox text_box(const std::string& s, double font, double x, double baseline, Anchor anchor = Anchor::start) {
    const double w = text_width(s, font);
    const double left = anchor == Anchor::start ? x : anchor == Anchor::middle ? x - w / 2 : x - w;
    return {left, baseline - font, w, kLineHeight * font};
}

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else out += c;
    }
    return out;
}

const char* anchor_name(Anchor a) { return a == Anchor::start ? "start" : a == Anchor::middle ? "middle" : "end"; }

std::string text(const std::string& s, double x, double baseline, Anchor anchor = Anchor::start, double font = kFont,
                 const char* fill = "black") {
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" font-size=\"{:g}\" fill=\"{}\">{}</text>\n",
                       x, baseline, anchor_name(anchor), font, fill, escape(s));
}

std::string context_label(int64_t context) {
    return context % 1024 == 0 ? fmt::format("{}K", context / 1024) : fmt::format("{}", context);
}

struct Line {  // a layer's variant in one panel
    std::map<int64_t, double> seconds;  // context → step seconds
    std::set<int64_t> noisy;            // contexts whose point looks timed under load
};
using Panel = std::map<int64_t, std::map<std::string, Line>>;  // layer → variant → line

}  // namespace

DecodePlot decode_plot(const std::vector<LayerPoint>& points, const std::string& isa, int threads,
                       const std::vector<int64_t>& swept_batches) {
    std::vector<std::string> presets;  // the columns, in the order of the sweep
    std::set<int64_t> batches, contexts;
    std::map<std::pair<std::string, int64_t>, Panel> panels;  // (preset, batch) → panel
    std::map<std::string, std::map<int64_t, std::string>> kinds;  // preset → layer → kind
    for (const LayerPoint& p : points) {
        if (p.phase != "decode" || p.isa != isa || p.threads != threads) continue;
        if (std::find(swept_batches.begin(), swept_batches.end(), p.batch) == swept_batches.end()) continue;
        if (std::find(presets.begin(), presets.end(), p.preset) == presets.end()) presets.push_back(p.preset);
        batches.insert(p.batch);
        contexts.insert(p.context);
        Line& line = panels[{p.preset, p.batch}][p.layer][p.variant];
        line.seconds[p.context] = p.seconds;
        if (!p.noise.empty()) line.noisy.insert(p.context);
        kinds[p.preset][p.layer] = p.kind;
    }

    DecodePlot plot;
    plot.batches.assign(batches.begin(), batches.end());
    std::string body;

    // The title: two lines above everything else.
    const std::string title = "sieve bench: decode step time per layer against context";
    const std::string subtitle = fmt::format("{}, {} thread(s); a row per batch size swept", isa, threads);
    const double title_base = kMargin + kTitleFont, subtitle_base = title_base + kLineHeight * kFont + 4;
    body += text(title, kMargin, title_base, Anchor::start, kTitleFont);
    body += text(subtitle, kMargin, subtitle_base, Anchor::start, kFont, "#444");
    plot.title = {kMargin, title_base - kTitleFont,
                  std::max(text_width(title, kTitleFont), text_width(subtitle, kFont)),
                  subtitle_base + (kLineHeight - 1) * kFont - (title_base - kTitleFont)};
    double right = plot.title.x + plot.title.w, bottom = plot.title.y + plot.title.h;

    const double grid_top = bottom + 12;
    const double cell_w = kYAxisW + kPlotW + kGapW, cell_h = kHeaderH + kPlotH + kXAxisH + kGapH;
    if (presets.empty()) {
        const std::string none = fmt::format("no decode points measured at {}, {} thread(s)", isa, threads);
        body += text(none, kMargin, grid_top + kFont);
        plot.labels.push_back(text_box(none, kFont, kMargin, grid_top + kFont));
        right = std::max(right, plot.labels.back().x + plot.labels.back().w);
        bottom = plot.labels.back().y + plot.labels.back().h;
    }

    // x: log2 of the context, the same for every panel, padded so that no marker sits on the frame.
    double x_lo = contexts.empty() ? 0 : std::log2(static_cast<double>(*contexts.begin()));
    double x_hi = contexts.empty() ? 1 : std::log2(static_cast<double>(*contexts.rbegin()));
    if (x_hi - x_lo < 1e-9) x_lo -= 0.5, x_hi += 0.5;
    const double x_pad = 0.04 * (x_hi - x_lo);
    x_lo -= x_pad, x_hi += x_pad;

    for (size_t col = 0; col < presets.size(); ++col) {
        const std::string& preset = presets[col];
        // y: log10 of milliseconds over the column's points, shared by its rows so that batches compare,
        // padded and at least half a decade high.
        double y_lo = 1e300, y_hi = -1e300;
        bool any_dense = false, any_noisy = false;
        for (int64_t batch : plot.batches) {
            const auto it = panels.find({preset, batch});
            if (it == panels.end()) continue;
            for (const auto& [layer, variants] : it->second)
                for (const auto& [variant, line] : variants) {
                    any_dense |= variant == "dense";
                    any_noisy |= !line.noisy.empty();
                    for (const auto& [ctx, s] : line.seconds) {
                        y_lo = std::min(y_lo, std::log10(1e3 * s));
                        y_hi = std::max(y_hi, std::log10(1e3 * s));
                    }
                }
        }
        const double y_span = std::max(y_hi - y_lo, 0.5), y_centre = (y_lo + y_hi) / 2;
        y_lo = y_centre - 0.55 * y_span, y_hi = y_centre + 0.55 * y_span;
        std::map<int64_t, const char*> colors;
        for (const auto& [layer, kind] : kinds[preset]) colors[layer] = kColors[colors.size() % std::size(kColors)];

        for (size_t row = 0; row < plot.batches.size(); ++row) {
            const int64_t batch = plot.batches[row];
            const double cell_x = kMargin + static_cast<double>(col) * cell_w;
            const double cell_y = grid_top + static_cast<double>(row) * cell_h;
            const PlotBox area{cell_x + kYAxisW, cell_y + kHeaderH, kPlotW, kPlotH};
            plot.plot_areas.push_back(area);
            auto px = [&](double lx) { return area.x + (lx - x_lo) / (x_hi - x_lo) * area.w; };
            auto py = [&](double ly) { return area.y + area.h - (ly - y_lo) / (y_hi - y_lo) * area.h; };

            const std::string header = fmt::format("{}, batch {}", preset, batch);
            body += text(header, area.x, area.y - 6, Anchor::start, kFont + 1);
            plot.labels.push_back(text_box(header, kFont + 1, area.x, area.y - 6));

            // Grid lines and tick labels: decades; over two decades or less also 2 and 5 between them,
            // over one decade or less 1.5, 3 and 7 too, so that every panel has labels to read.
            for (double e = std::floor(y_lo); e <= y_hi; e += 1)
                for (double m : {1.0, 1.5, 2.0, 3.0, 5.0, 7.0}) {
                    const double ly = e + std::log10(m);
                    const bool shown = m == 1.0 || (y_hi - y_lo <= 2 && (m == 2.0 || m == 5.0)) || y_hi - y_lo <= 1;
                    if (ly < y_lo || ly > y_hi || !shown) continue;
                    body += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n",
                                        area.x, py(ly), area.x + area.w, py(ly));
                    body += text(fmt::format("{:g}", std::pow(10.0, ly)), area.x - 4, py(ly) + 4, Anchor::end);
                }
            double last_label_right = -1e300;
            for (int64_t ctx : contexts) {
                const double x = px(std::log2(static_cast<double>(ctx)));
                body += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n", x,
                                    area.y, x, area.y + area.h);
                const PlotBox b = text_box(context_label(ctx), kFont, x, area.y + area.h + 14, Anchor::middle);
                if (b.x < last_label_right + 4) continue;  // would run into the previous label
                last_label_right = b.x + b.w;
                body += text(context_label(ctx), x, area.y + area.h + 14, Anchor::middle);
            }
            body += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
                                "stroke=\"#888\"/>\n",
                                area.x, area.y, area.w, area.h);
            const std::string x_title = "context (tokens in the cache)";
            body += text(x_title, area.x + area.w / 2, area.y + area.h + 32, Anchor::middle);
            plot.labels.push_back(text_box(x_title, kFont, area.x + area.w / 2, area.y + area.h + 32, Anchor::middle));
            // The y title, turned to read upwards: its baseline is the vertical line x = y_title_x.
            const std::string y_title = "step time (ms)";
            const double y_title_x = cell_x + 16, y_mid = area.y + area.h / 2, y_w = text_width(y_title, kFont);
            body += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
                                "font-size=\"{:g}\">{}</text>\n",
                                y_title_x, y_mid, kFont, y_title);
            plot.labels.push_back({y_title_x - kFont, y_mid - y_w / 2, kLineHeight * kFont, y_w});

            const auto it = panels.find({preset, batch});
            if (it == panels.end()) {
                body += text("not measured", area.x + area.w / 2, area.y + area.h / 2, Anchor::middle, kFont, "#888");
                continue;
            }
            for (const auto& [layer, variants] : it->second)
                for (const auto& [variant, line] : variants) {
                    const char* color = colors[layer];
                    std::string pts;
                    for (const auto& [ctx, s] : line.seconds)
                        pts += fmt::format("{:.1f},{:.1f} ", px(std::log2(static_cast<double>(ctx))), py(std::log10(1e3 * s)));
                    if (line.seconds.size() > 1)
                        body += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
                                            pts, color, variant == "dense" ? " stroke-dasharray=\"6,4\"" : "");
                    for (const auto& [ctx, s] : line.seconds) {
                        const double x = px(std::log2(static_cast<double>(ctx))), y = py(std::log10(1e3 * s));
                        body += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n", x, y, color);
                        if (line.noisy.count(ctx))
                            body += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" fill=\"none\" stroke=\"black\" "
                                                "stroke-width=\"1.2\"/>\n",
                                                x, y);
                    }
                }
        }

        // The column's legend, below its last row.
        const double lx = kMargin + static_cast<double>(col) * cell_w + kYAxisW;
        const double ly = grid_top + static_cast<double>(plot.batches.size()) * cell_h;
        std::vector<std::pair<std::string, std::string>> entries;  // text, the sample's SVG at (0, 0)
        for (const auto& [layer, color] : colors)
            entries.emplace_back(
                fmt::format("layer {} ({})", layer, kinds[preset][layer]),
                fmt::format("<line x1=\"0\" y1=\"0\" x2=\"{:g}\" y2=\"0\" stroke=\"{}\" stroke-width=\"2\"/>", kLegendSample, color));
        entries.emplace_back("sparse attention",
                             fmt::format("<line x1=\"0\" y1=\"0\" x2=\"{:g}\" y2=\"0\" stroke=\"#555\" stroke-width=\"2\"/>", kLegendSample));
        if (any_dense)
            entries.emplace_back("dense attention", fmt::format("<line x1=\"0\" y1=\"0\" x2=\"{:g}\" y2=\"0\" stroke=\"#555\" "
                                                                "stroke-width=\"2\" stroke-dasharray=\"6,4\"/>",
                                                                kLegendSample));
        if (any_noisy)
            entries.emplace_back("noisy point (see the report)",
                                 fmt::format("<circle cx=\"{:g}\" cy=\"0\" r=\"6\" fill=\"none\" stroke=\"black\" "
                                             "stroke-width=\"1.2\"/>",
                                             kLegendSample / 2));
        double text_w = 0;
        for (const auto& [label, sample] : entries) text_w = std::max(text_w, text_width(label, kFont));
        const PlotBox legend{lx, ly, 8 + kLegendSample + 8 + text_w + 8, 6 + kLegendRow * static_cast<double>(entries.size())};
        body += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
                            "stroke=\"#ccc\"/>\n",
                            legend.x, legend.y, legend.w, legend.h);
        for (size_t e = 0; e < entries.size(); ++e) {
            const double row_mid = legend.y + 3 + kLegendRow * (static_cast<double>(e) + 0.5);
            body += fmt::format("<g transform=\"translate({:.1f},{:.1f})\">{}</g>\n", legend.x + 8, row_mid,
                                entries[e].second);
            body += text(entries[e].first, legend.x + 8 + kLegendSample + 8, row_mid + 4);
        }
        plot.legends.push_back(legend);
        right = std::max({right, legend.x + legend.w, kMargin + static_cast<double>(col + 1) * cell_w - kGapW});
        bottom = std::max(bottom, legend.y + legend.h);
    }

    plot.canvas = {0, 0, right + kMargin, bottom + kMargin};
    plot.svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
        "font-family=\"sans-serif\" font-size=\"{:g}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        std::ceil(plot.canvas.w), std::ceil(plot.canvas.h), std::ceil(plot.canvas.w), std::ceil(plot.canvas.h), kFont);
    plot.svg += body;
    plot.svg += "</svg>\n";
    return plot;
}

}  // namespace sieve::cli

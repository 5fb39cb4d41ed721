#include "noise.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace sieve::bench {

namespace {

// Seconds per roofline second; 0 where either is unknown.
double time_per_work(const NoiseStage& s) { return s.seconds > 0 && s.roofline_seconds > 0 ? s.seconds / s.roofline_seconds : 0; }

bool judged(const NoiseStage& s, const NoiseStage& step) {
    return s.roofline_seconds > 0 && s.seconds > 0 && s.seconds >= kJudgedStageFraction * step.seconds;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void add_reason(Noise& n, const std::string& why) {
    if (!n.reason.empty()) n.reason += "; ";
    n.reason += why;
}

// The stage of a point by name: the step, or one of its stages; nullptr where it has none.
const NoiseStage* find_stage(const NoisePoint& p, const std::string& name) {
    if (name == p.step.name) return &p.step;
    for (const NoiseStage& s : p.stages)
        if (s.name == name) return &s;
    return nullptr;
}

// Flags the points of one line (a series at a fixed other coordinate, in axis order) whose judged
// stages run slower per unit of work than kOutOfLineFactor times their neighbourhood's median.
void judge_line(const std::vector<NoisePoint>& points, const std::vector<size_t>& line, int axis,
                std::vector<Noise>& out) {
    std::vector<std::string> names = {points[line.front()].step.name};
    for (const NoiseStage& s : points[line.front()].stages) names.push_back(s.name);
    for (const std::string& name : names) {
        // The points of the line where the stage ran, with its time per unit of work.
        std::vector<std::pair<size_t, double>> values;
        for (size_t i : line)
            if (const NoiseStage* s = find_stage(points[i], name); s && time_per_work(*s) > 0)
                values.emplace_back(i, time_per_work(*s));
        for (size_t k = 0; k < values.size(); ++k) {
            const NoisePoint& p = points[values[k].first];
            const NoiseStage& s = *find_stage(p, name);
            if (!judged(s, p.step)) continue;
            std::vector<double> hood;
            for (size_t j = k >= 2 ? k - 2 : 0; j < std::min(values.size(), k + 3); ++j) hood.push_back(values[j].second);
            if (hood.size() < 3) continue;
            const double m = median(hood);
            if (values[k].second <= kOutOfLineFactor * m) continue;
            Noise& n = out[values[k].first];
            n.out_of_line = true;
            add_reason(n, fmt::format("{} {:.1f}x the time per unit of work of its neighbouring {}", name,
                                      values[k].second / m, p.axis_names[static_cast<size_t>(axis)]));
        }
    }
}

}  // namespace

std::vector<Noise> judge_noise(const std::vector<NoisePoint>& points) {
    std::vector<Noise> out(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
        const NoisePoint& p = points[i];
        Noise& n = out[i];
        if (p.step.seconds > 0 && p.step.roofline_seconds > p.step.seconds) {
            n.above_roofline = true;
            add_reason(n, fmt::format("the step at {:.0f}% of its roofline", 100 * p.step.roofline_seconds / p.step.seconds));
        }
        for (const NoiseStage& s : p.stages)
            if (judged(s, p.step) && s.roofline_seconds > s.seconds) {
                n.above_roofline = true;
                add_reason(n, fmt::format("{} at {:.0f}% of its roofline", s.name, 100 * s.roofline_seconds / s.seconds));
            }
        if (p.spread > kMaxSpread) {
            n.spread = true;
            add_reason(n, fmt::format("repetitions spread {:.0f}% (more than {:.0f}%)", 100 * p.spread, 100 * kMaxSpread));
        }
    }
    // Lines: the points of a series that share the other coordinate, in order along the axis.
    for (int axis = 0; axis < 2; ++axis) {
        std::map<std::tuple<std::string, int64_t>, std::vector<size_t>> lines;
        for (size_t i = 0; i < points.size(); ++i)
            lines[{points[i].series, points[i].at[static_cast<size_t>(1 - axis)]}].push_back(i);
        for (auto& [key, line] : lines) {
            std::sort(line.begin(), line.end(), [&](size_t a, size_t b) {
                return points[a].at[static_cast<size_t>(axis)] < points[b].at[static_cast<size_t>(axis)];
            });
            judge_line(points, line, axis, out);
        }
    }
    return out;
}

}  // namespace sieve::bench

// Time spent per stage of a layer (projections, compressor, indexer, top-k, attention, output),
// summed over layers and steps, for `sieve run`'s summary.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

namespace sieve {

enum class Stage { projections, compressor, indexer, topk, attention, output, other, count };
std::string_view stage_name(Stage s);

struct StageTimes {
    std::array<double, static_cast<size_t>(Stage::count)> seconds{};
    double& operator[](Stage s) { return seconds[static_cast<size_t>(s)]; }
    double operator[](Stage s) const { return seconds[static_cast<size_t>(s)]; }
    double total() const;
    void add(const StageTimes& other);
};

// Adds the time from construction to destruction (or stop()) to one stage; a null `times` makes it
// a no-op, so layers can time unconditionally.
class ScopedStageTimer {
public:
    ScopedStageTimer(StageTimes* times, Stage stage) : times_(times), stage_(stage), start_(clock::now()) {}
    ~ScopedStageTimer() { stop(); }
    void stop() {
        if (!times_) return;
        (*times_)[stage_] += std::chrono::duration<double>(clock::now() - start_).count();
        times_ = nullptr;
    }

private:
    using clock = std::chrono::steady_clock;
    StageTimes* times_;
    Stage stage_;
    clock::time_point start_;
};

}  // namespace sieve

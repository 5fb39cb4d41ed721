#include "sieve/core/stage_timer.h"

namespace sieve {

std::string_view stage_name(Stage s) {
    switch (s) {
        case Stage::projections: return "projections";
        case Stage::compressor: return "compressor";
        case Stage::indexer: return "indexer";
        case Stage::topk: return "top-k";
        case Stage::attention: return "attention";
        case Stage::output: return "output";
        case Stage::other: return "other";
        case Stage::count: break;
    }
    return "?";
}

double StageTimes::total() const {
    double t = 0;
    for (double s : seconds) t += s;
    return t;
}

void StageTimes::add(const StageTimes& other) {
    for (size_t i = 0; i < seconds.size(); ++i) seconds[i] += other.seconds[i];
}

}  // namespace sieve

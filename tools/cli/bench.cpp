#include "bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "ceilings.h"
#include "core/cpu_features.h"

namespace sieve::cli {

Status run_bench(const BenchOptions& options, std::ostream& out) {
    ThreadPool& pool = ThreadPool::global();
    const std::vector<bench::Ceiling> ceilings = bench::measure_ceilings(pool, options.quick);
    if (options.json) {
        nlohmann::json j{{"isa", isa_name(active_isa())}, {"threads", pool.size()}};
        for (const bench::Ceiling& c : ceilings)
            j["ceilings"].push_back({{"name", c.name}, {"unit", c.unit}, {"isa", c.isa}, {"threads", c.threads},
                                     {"value", c.value}, {"spread", c.spread}});
        out << j.dump(2) << "\n";
        return Status::ok();
    }
    fmt::print(out, "machine ceilings (median of repeated runs; spread = (max - min) / median)\n");
    fmt::print(out, "  {:<16} {:<12} {:>7} {:>12} {:>8}\n", "ceiling", "isa", "threads", "value", "spread");
    for (const bench::Ceiling& c : ceilings)
        fmt::print(out, "  {:<16} {:<12} {:>7} {:>8.1f} {:<7} {:>6.1f}%\n", c.name, c.isa, c.threads, c.value, c.unit,
                   100 * c.spread);
    return Status::ok();
}

}  // namespace sieve::cli

// Counting operator new for the "run of an op allocates nothing" tests (DESIGN.md). alloc_counter.cpp
// replaces the global operator new / delete of the test executable it is compiled into (one per
// executable); allocations_during counts every operator new call made by fn() on any thread.
#pragma once

#include <cstdint>

namespace sieve::test {

void start_counting_allocations();
int64_t stop_counting_allocations();  // allocations since start_counting_allocations()

template <typename F>
int64_t allocations_during(F&& fn) {
    start_counting_allocations();
    fn();
    return stop_counting_allocations();
}

}  // namespace sieve::test

#include "core/assert.h"

#include <cstdio>
#include <cstdlib>

namespace sieve::detail {

void assert_fail(const char* condition, const char* file, int line, const char* message) {
    std::fprintf(stderr, "sieve: internal invariant failed: %s (%s:%d) %s\n", condition, file, line,
                 message);
    std::abort();
}

}  // namespace sieve::detail

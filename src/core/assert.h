// Invariant checks. SIEVE_ASSERT is always on (a failed invariant is a bug in sieve, never bad
// input: bad input gets a Status). SIEVE_DCHECK is for hot loops and compiles away in release.
#pragma once

namespace sieve::detail {
[[noreturn]] void assert_fail(const char* condition, const char* file, int line, const char* message);
}

#define SIEVE_ASSERT(cond, ...)                                                           \
    do {                                                                                  \
        if (!(cond)) [[unlikely]]                                                         \
            ::sieve::detail::assert_fail(#cond, __FILE__, __LINE__, "" __VA_ARGS__);      \
    } while (0)

#ifdef NDEBUG
#define SIEVE_DCHECK(cond, ...) \
    do {                        \
    } while (0)
#else
#define SIEVE_DCHECK(cond, ...) SIEVE_ASSERT(cond, __VA_ARGS__)
#endif

// Remembers every live operator-new block (start, size) of a conformance test binary, so that the
// harness's device mirror (harness.cpp) can upload the whole allocation an op's pointer lies in: the
// tests keep many inputs in std::vectors. Replaces the global operator new / delete, so it is linked
// only into the binaries that do not count allocations themselves (alloc_counter.cpp does the same).
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "harness.h"

namespace {

// The registry's own nodes come from malloc, never from the operator new being replaced.
template <typename T>
struct MallocAllocator {
    using value_type = T;
    MallocAllocator() = default;
    template <typename U>
    MallocAllocator(const MallocAllocator<U>&) {}
    T* allocate(std::size_t n) {
        if (void* p = std::malloc(n * sizeof(T))) return static_cast<T*>(p);
        throw std::bad_alloc();
    }
    void deallocate(T* p, std::size_t) { std::free(p); }
    template <typename U>
    bool operator==(const MallocAllocator<U>&) const { return true; }
};

struct Blocks {
    std::mutex mutex;
    std::map<uintptr_t, std::size_t, std::less<>, MallocAllocator<std::pair<const uintptr_t, std::size_t>>> live;
};
Blocks& blocks() {
    // Never destroyed: operator delete may run after static destructors.
    static Blocks* b = new (std::malloc(sizeof(Blocks))) Blocks();
    return *b;
}

void* allocate(std::size_t n) {
    void* p = std::malloc(n == 0 ? 1 : n);
    if (p == nullptr) throw std::bad_alloc();
    Blocks& b = blocks();
    std::lock_guard lock(b.mutex);
    b.live[reinterpret_cast<uintptr_t>(p)] = n;
    return p;
}
void release(void* p) {
    if (p == nullptr) return;
    {
        Blocks& b = blocks();
        std::lock_guard lock(b.mutex);
        b.live.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
}

bool find_block(const void* p, const void** start, std::size_t* bytes) {
    Blocks& b = blocks();
    std::lock_guard lock(b.mutex);
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = b.live.upper_bound(a);
    if (it == b.live.begin()) return false;
    --it;
    if (a > it->first + it->second) return false;
    *start = reinterpret_cast<const void*>(it->first);
    *bytes = it->second;
    return true;
}

const bool registered = (sieve::test::set_heap_block_lookup(find_block), true);

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }

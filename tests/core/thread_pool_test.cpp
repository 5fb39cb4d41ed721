#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace sieve {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
    ThreadPool pool(4);
    EXPECT_EQ(pool.size(), 4);
    for (int64_t n : {1, 3, 4, 5, 100, 1001}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
}

TEST(ThreadPool, RespectsMinChunkAndRunsManyJobs) {
    ThreadPool pool(3);
    std::atomic<int> calls{0};
    pool.parallel_for(10, [&](int64_t, int64_t) { calls++; }, 100);
    EXPECT_EQ(calls.load(), 1);
    std::atomic<int64_t> sum{0};
    for (int rep = 0; rep < 500; ++rep)
        pool.parallel_for(64, [&](int64_t b, int64_t e) { sum += e - b; });
    EXPECT_EQ(sum.load(), 500 * 64);
    pool.parallel_for(0, [&](int64_t, int64_t) { FAIL(); });
}

// park() makes the idle workers block at once instead of spinning; the next job wakes every one of them
// (each of its 4 chunks runs on a thread of its own), before and after their spin would have ended.
TEST(ThreadPool, ParkedWorkersTakeTheNextJob) {
    ThreadPool pool(4);
    for (int rep = 0; rep < 50; ++rep) {
        pool.park();
        if (rep % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::atomic<int> chunks{0};
        std::mutex m;
        std::set<std::thread::id> threads;
        pool.parallel_for(4, [&](int64_t b, int64_t e) {
            chunks += static_cast<int>(e - b);
            std::lock_guard lock(m);
            threads.insert(std::this_thread::get_id());
        });
        ASSERT_EQ(chunks.load(), 4);
        ASSERT_EQ(threads.size(), 4u) << "rep " << rep;
    }
}

TEST(ThreadPool, NestedAndConcurrentCallsComplete) {
    ThreadPool pool(2);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(8, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) pool.parallel_for(10, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
    });
    EXPECT_EQ(sum.load(), 80);
    std::thread other([&] {
        for (int rep = 0; rep < 200; ++rep) pool.parallel_for(16, [&](int64_t b, int64_t e) { sum += e - b; });
    });
    for (int rep = 0; rep < 200; ++rep) pool.parallel_for(16, [&](int64_t b, int64_t e) { sum += e - b; });
    other.join();
    EXPECT_EQ(sum.load(), 80 + 2 * 200 * 16);
}

TEST(ThreadPool, ActiveThreadCap) {
    ThreadPool pool(4);
    auto chunks = [&] {
        std::atomic<int> n{0};
        pool.parallel_for(1000, [&](int64_t, int64_t) { ++n; });
        return n.load();
    };
    EXPECT_EQ(chunks(), 4);
    pool.set_active_threads(1);
    EXPECT_EQ(pool.active_threads(), 1);
    EXPECT_EQ(chunks(), 1);
    pool.set_active_threads(3);
    EXPECT_EQ(chunks(), 3);
    pool.set_active_threads(99);  // capped at the pool's size
    EXPECT_EQ(pool.active_threads(), 4);
    pool.set_active_threads(0);  // all
    EXPECT_EQ(chunks(), 4);
}

TEST(ThreadPool, EnvironmentSetsDefault) {
    setenv("SIEVE_NUM_THREADS", "3", 1);
    EXPECT_EQ(default_thread_count(), 3);
    setenv("SIEVE_NUM_THREADS", "zero", 1);
    EXPECT_GE(default_thread_count(), 1);
    unsetenv("SIEVE_NUM_THREADS");
}

}  // namespace
}  // namespace sieve

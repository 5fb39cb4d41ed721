// A persistent thread pool for data-parallel loops. The calling thread takes part in the work,
// so a pool of n threads starts n − 1 workers. Idle workers spin for a while (kIdleSpinMicros) before
// they block, and the waiting caller briefly: a decode step runs dozens of short parallel ops, and a
// futex wake-up per op would cost more than some of the ops. Ops called one by one from Python leave
// gaps of tens of microseconds between them, which the idle spin covers (here, an empty sparse attention
// call from Python took 83 µs on 2 threads with a 30 µs spin, 16 µs with 300). Before handing the cores
// to another runtime (oneDNN's OpenMP threads), park() stops the spinning at once. Thread count: the explicit argument, else the
// SIEVE_NUM_THREADS environment variable, else the number of online cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sieve {

int default_thread_count();  // SIEVE_NUM_THREADS if set and valid, else hardware cores

class ThreadPool {
public:
    explicit ThreadPool(int n_threads = 0);  // 0 = default_thread_count()
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Caps how many threads later parallel_for calls use (1 ≤ n ≤ size(); 0 = all), so that one
    // process can measure thread scaling (`sieve bench`). Idle workers stay parked.
    void set_active_threads(int n);
    int active_threads() const { return active_threads_.load(std::memory_order_relaxed); }

    // Calls fn(begin, end) over a partition of [0, n) into contiguous chunks of at least
    // `min_chunk` items, one chunk per thread at most; returns when all chunks are done.
    // Safe to call from several threads (calls take turns) and from inside fn (a nested call runs
    // serially on the calling thread instead of deadlocking).
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

    // Idle workers stop spinning and block until the next parallel_for: called before work that runs on
    // other threads (oneDNN's OpenMP pool), so that they do not compete with it for the cores.
    void park() { parked_.store(true, std::memory_order_relaxed); }

    // The process-wide pool that ops use when the caller passes none.
    static ThreadPool& global();

private:
    void worker_loop(int index);

    int n_threads_;
    std::atomic<int> active_threads_{0};
    std::vector<std::thread> workers_;
    std::mutex call_mutex_;  // one parallel_for at a time
    std::mutex mutex_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0;
    int job_chunks_ = 0;
    // Written under mutex_; atomic so that waiting threads can spin on them briefly before blocking.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::atomic<bool> parked_{false};  // set by park(), cleared by the next parallel_for
};

}  // namespace sieve

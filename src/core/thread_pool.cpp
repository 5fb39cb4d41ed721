#include "core/thread_pool.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace sieve {

int default_thread_count() {
    if (const char* env = std::getenv("SIEVE_NUM_THREADS")) {
        int n = 0;
        const char* end = env + std::strlen(env);
        auto [ptr, ec] = std::from_chars(env, end, n);
        if (ec == std::errc() && ptr == end && n > 0 && n <= 4096) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
    active_threads_.store(n_threads_, std::memory_order_relaxed);
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& w : workers_) w.join();
}

namespace {
// Set while this thread runs a chunk of some pool's job: a nested parallel_for runs serially.
thread_local bool t_inside_job = false;

// Spins until done() or about `micros` have passed; true when done() held.
constexpr int64_t kIdleSpinMicros = 300;  // an idle worker, waiting for the next job (see thread_pool.h)
constexpr int64_t kJoinSpinMicros = 30;   // the caller, waiting for the workers' chunks of its job
template <typename Done>
bool spin_until(int64_t micros, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    for (;;) {
        for (int i = 0; i < 64; ++i) {
            if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
        if (std::chrono::steady_clock::now() >= deadline) return done();
    }
}

// Chunk c of `chunks` equal parts of [0, n).
std::pair<int64_t, int64_t> chunk_range(int64_t n, int chunks, int c) {
    return {n * c / chunks, n * (c + 1) / chunks};
}
}  // namespace

void ThreadPool::set_active_threads(int n) {
    active_threads_.store(n <= 0 ? n_threads_ : std::min(n, n_threads_), std::memory_order_relaxed);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
    if (n <= 0) return;
    min_chunk = std::max<int64_t>(1, min_chunk);
    const int chunks = static_cast<int>(std::min<int64_t>(active_threads(), (n + min_chunk - 1) / min_chunk));
    if (chunks <= 1 || t_inside_job) {
        fn(0, n);
        return;
    }
    std::lock_guard call_lock(call_mutex_);
    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        job_n_ = n;
        job_chunks_ = chunks;
        pending_.store(chunks - 1);
        parked_.store(false, std::memory_order_relaxed);
        generation_.fetch_add(1);
    }
    start_cv_.notify_all();
    const auto [b, e] = chunk_range(n, chunks, 0);
    t_inside_job = true;
    fn(b, e);
    t_inside_job = false;
    if (!spin_until(kJoinSpinMicros, [this] { return pending_.load() == 0; })) {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [this] { return pending_.load() == 0; });
    }
    std::lock_guard lock(mutex_);
    job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* job;
        int64_t n;
        int chunks;
        spin_until(kIdleSpinMicros, [&] {
            return stop_.load() || generation_.load() != seen || parked_.load(std::memory_order_relaxed);
        });
        {
            std::unique_lock lock(mutex_);
            start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
            if (stop_) return;
            seen = generation_.load();
            job = job_;
            n = job_n_;
            chunks = job_chunks_;
        }
        if (index < chunks) {
            const auto [b, e] = chunk_range(n, chunks, index);
            t_inside_job = true;
            (*job)(b, e);
            t_inside_job = false;
            std::lock_guard lock(mutex_);
            if (pending_.fetch_sub(1) == 1) done_cv_.notify_one();
        }
    }
}

ThreadPool& ThreadPool::global() {
    static ThreadPool pool;
    return pool;
}

}  // namespace sieve

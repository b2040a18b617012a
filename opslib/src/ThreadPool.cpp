// ThreadPool.cpp - persistent worker threads (one fewer than the host's cores: the calling stream
// worker takes part) that run chunks of ParallelFor jobs.
#include "ThreadPool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace npu::opslib {
namespace {

thread_local bool t_is_pool_thread = false;

struct Job {
  void* context = nullptr;
  RangeFn fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next{0};        // next chunk to claim
  std::atomic<int64_t> unfinished{0};  // chunks not yet run to the end
  std::mutex mu;
  std::condition_variable done;
  std::exception_ptr error;  // first failure, guarded by mu
};

// Claims and runs chunks until none is left. Chunks are claimed, not assigned, so a thread that
// is slow (or busy with another stream's job) simply does fewer of them.
void RunChunks(Job& job) {
  for (;;) {
    const int64_t index = job.next.fetch_add(1, std::memory_order_relaxed);
    if (index >= job.num_chunks) return;
    const int64_t begin = index * job.chunk;
    const int64_t end = std::min(job.n, begin + job.chunk);
    try {
      job.fn(job.context, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.mu);
      if (!job.error) job.error = std::current_exception();
    }
    if (job.unfinished.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Under the mutex, so that the waiting caller cannot miss the notification.
      std::lock_guard<std::mutex> lock(job.mu);
      job.done.notify_all();
    }
  }
}

class ThreadPool {
 public:
  explicit ThreadPool(int workers) {
    for (int i = 0; i < workers; ++i) {
      try {
        threads_.emplace_back([this] { WorkerLoop(); });
      } catch (...) {
        break;  // fewer threads is slower, not wrong
      }
    }
  }

  int threads() const { return static_cast<int>(threads_.size()) + 1; }

  void Run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
    }
    cv_.notify_all();
    RunChunks(*job);
    {
      std::unique_lock<std::mutex> lock(job->mu);
      job->done.wait(lock, [&] { return job->unfinished.load(std::memory_order_acquire) == 0; });
    }
    // Workers drop exhausted jobs when they see them; if none woke up in time, do it here.
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(queue_, job);
  }

 private:
  void WorkerLoop() {
    t_is_pool_thread = true;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      std::shared_ptr<Job> job = queue_.front();  // shared: the caller may return meanwhile
      if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
        queue_.pop_front();
        continue;
      }
      lock.unlock();
      RunChunks(*job);
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::thread> threads_;
};

// The pool is created on first use and deliberately leaked: its threads must outlive static
// destructors of other libraries that might still run kernels at exit. A forked child gets a new
// pool on first use, since the parent's threads do not exist there.
std::mutex g_pool_mu;
ThreadPool* g_pool = nullptr;

ThreadPool& Pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_pool == nullptr) {
    static const bool fork_handler_installed = [] {
      pthread_atfork([] { g_pool_mu.lock(); }, [] { g_pool_mu.unlock(); },
                     [] {
                       g_pool = nullptr;  // the old pool's threads are gone; leak it
                       g_pool_mu.unlock();
                     });
      return true;
    }();
    (void)fork_handler_installed;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    g_pool = new ThreadPool(static_cast<int>(cores) - 1);
  }
  return *g_pool;
}

std::atomic<aclnnParallelForFn> g_host_parallel_for{nullptr};

}  // namespace

int ParallelThreads() { return Pool().threads(); }

void ParallelFor(int64_t n, int64_t min_chunk, void* context, RangeFn fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  if (t_is_pool_thread || n < 2 * min_chunk) {
    fn(context, 0, n);
    return;
  }
  if (aclnnParallelForFn host = g_host_parallel_for.load(std::memory_order_acquire)) {
    host(n, min_chunk, context, fn);
    return;
  }
  ThreadPool& pool = Pool();
  const int threads = pool.threads();
  if (threads == 1) {
    fn(context, 0, n);
    return;
  }
  // About four chunks per thread balances uneven progress; multiples of 64 elements keep chunk
  // boundaries on cache lines for every element size.
  int64_t chunk = std::max(min_chunk, (n + threads * 4 - 1) / (threads * 4));
  chunk = (chunk + 63) / 64 * 64;
  auto job = std::make_shared<Job>();
  job->context = context;
  job->fn = fn;
  job->n = n;
  job->chunk = chunk;
  job->num_chunks = (n + chunk - 1) / chunk;
  job->unfinished.store(job->num_chunks, std::memory_order_relaxed);
  pool.Run(job);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace npu::opslib

extern "C" void aclnnParallelFor(int64_t n, int64_t min_chunk, void* context, aclnnParallelRangeFn fn) {
  npu::opslib::ParallelFor(n, min_chunk, context, fn);
}

extern "C" void aclnnSetParallelFor(aclnnParallelForFn parallel_for) {
  npu::opslib::g_host_parallel_for.store(parallel_for, std::memory_order_release);
}

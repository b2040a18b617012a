// DeferredRelease.cpp - the release thread (see DeferredRelease.h).
#include "csrc/framework/DeferredRelease.h"

#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace at_npu::native {
namespace {

struct ReleaseQueue {
  std::mutex mutex;
  std::condition_variable work;
  std::condition_variable done;
  std::vector<std::shared_ptr<void>> pending;
  uint64_t handed = 0;
  uint64_t released = 0;
  bool started = false;
  bool stopped = false;
};

// Leaked on purpose: the release thread may outlive static destruction, and a forked child starts
// with a fresh queue (the parent's objects stay unreleased there; the child never ran their tasks).
ReleaseQueue* g_queue = new ReleaseQueue;

void releaseLoop(ReleaseQueue* q) {
  pthread_setname_np(pthread_self(), "npu-release");
  std::vector<std::shared_ptr<void>> batch;
  std::unique_lock<std::mutex> lock(q->mutex);
  for (;;) {
    q->work.wait(lock, [q] { return !q->pending.empty(); });
    batch.swap(q->pending);
    lock.unlock();
    const size_t n = batch.size();
    batch.clear();  // may take the GIL
    lock.lock();
    q->released += n;
    q->done.notify_all();
  }
}

struct ForkRegistration {
  ForkRegistration() {
    pthread_atfork(nullptr, nullptr, [] { g_queue = new ReleaseQueue; });
  }
} fork_registration;

}  // namespace

void releaseLater(std::shared_ptr<void> owner) noexcept {
  ReleaseQueue* q = g_queue;
  std::lock_guard<std::mutex> lock(q->mutex);
  if (q->stopped) {
    new std::shared_ptr<void>(std::move(owner));  // leaked: see drainReleases
    return;
  }
  if (!q->started) {
    try {
      std::thread(releaseLoop, q).detach();
      q->started = true;
    } catch (...) {
      new std::shared_ptr<void>(std::move(owner));  // no thread: leak rather than risk the worker
      return;
    }
  }
  q->pending.push_back(std::move(owner));
  ++q->handed;
  q->work.notify_one();
}

void drainReleases(bool stop) {
  ReleaseQueue* q = g_queue;
  std::unique_lock<std::mutex> lock(q->mutex);
  const uint64_t target = q->handed;
  q->done.wait(lock, [q, target] { return q->released >= target; });
  if (stop) q->stopped = true;
}

std::pair<uint64_t, uint64_t> releaseCounts() {
  ReleaseQueue* q = g_queue;
  std::lock_guard<std::mutex> lock(q->mutex);
  return {q->handed, q->released};
}

}  // namespace at_npu::native

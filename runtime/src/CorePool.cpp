// CorePool.cpp - block scheduling on a device's simulated cores.
#include "CorePool.h"

#include <algorithm>

namespace npu::runtime {

CorePool::CorePool(int cores) : cores_(std::max(cores, 1)) {}

CorePool::~CorePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void CorePool::Run(uint32_t blocks, const std::function<void(uint32_t)>& block) {
  if (blocks == 0) return;
  Job job;
  job.blocks = blocks;
  job.block = &block;
  std::unique_lock<std::mutex> lock(mutex_);
  const size_t wanted = std::min<size_t>(static_cast<size_t>(cores_), blocks);
  while (threads_.size() < wanted) threads_.emplace_back([this] { Work(); });
  jobs_.push_back(&job);
  work_.notify_all();
  job.finished.wait(lock, [&] { return job.done == job.blocks; });
}

void CorePool::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left to run
    Job* job = jobs_.front();
    const uint32_t index = job->next++;
    if (job->next == job->blocks) jobs_.pop_front();
    lock.unlock();
    (*job->block)(index);  // never throws: the launcher catches everything a block raises
    lock.lock();
    if (++job->done == job->blocks) job->finished.notify_one();
  }
}

}  // namespace npu::runtime

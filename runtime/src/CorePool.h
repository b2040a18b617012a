// CorePool.h - a device's simulated AI cores: worker threads that run the blocks of a kernel launch
// in parallel while the launching stream's worker waits for the last one.
#ifndef NPU_RUNTIME_SRC_CORE_POOL_H_
#define NPU_RUNTIME_SRC_CORE_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace npu::runtime {

class CorePool {
 public:
  explicit CorePool(int cores);  // threads start on demand, up to `cores`
  ~CorePool();                   // joins the threads; no Run() may be in progress
  CorePool(const CorePool&) = delete;
  CorePool& operator=(const CorePool&) = delete;

  int cores() const { return cores_; }
  // Runs block(i) for every i in [0, blocks) on the cores, at most cores() at a time, and returns
  // once all have finished. Launches from several streams share the cores in arrival order.
  void Run(uint32_t blocks, const std::function<void(uint32_t)>& block);

 private:
  struct Job {
    uint32_t blocks = 0;
    uint32_t next = 0;  // next block to hand out
    uint32_t done = 0;
    const std::function<void(uint32_t)>* block = nullptr;
    std::condition_variable finished;
  };

  void Work();

  const int cores_;
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Job*> jobs_;  // jobs with blocks not yet handed out, oldest first
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

// In a forked child: abandons the parent's pools (their threads are gone); see Runtime.cpp.
void ForgetCorePoolsAfterFork();

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_CORE_POOL_H_

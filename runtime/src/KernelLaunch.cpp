// KernelLaunch.cpp - nrtLaunchKernel: a kernel launch is one host task on its stream (so it keeps
// stream order with everything else) that runs the blocks on the device's CorePool and reports the
// first failing block.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "Activity.h"
#include <atomic>

#include "CorePool.h"
#include "Error.h"
#include "Runtime.h"
#include "npu/kernel_launch.h"
#include "npu/graph.h"

namespace npu::runtime {
namespace {

constexpr int kDefaultCoreCount = 8;
constexpr int kMaxCoreCount = 1024;

struct BlockContext {
  uint32_t index = 0;
  uint32_t count = 1;
  std::string error;
};
thread_local BlockContext t_block;
thread_local std::string t_launch_tag;

int ReadCoreCount() {
  const char* text = std::getenv("NPU_SIM_CORES");
  if (text == nullptr) return kDefaultCoreCount;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > kMaxCoreCount) {
    NPU_RT_LOG(kWarning, "ignoring NPU_SIM_CORES=\"", text, "\": expected a core count in [1, ",
               kMaxCoreCount, "]; using the default of ", kDefaultCoreCount, " cores per device");
    return kDefaultCoreCount;
  }
  return static_cast<int>(value);
}

// The core pools of the running runtime generation, one per device, created on first use. A new
// generation (after nrtFinalize) re-reads NPU_SIM_CORES; the old pools are idle by then, because
// nrtFinalize drains every stream.
class CorePools {
 public:
  CorePool& For(uint64_t generation, int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation != generation_) {
      pools_.clear();
      generation_ = generation;
      cores_ = ReadCoreCount();
    }
    if (pools_.size() <= static_cast<size_t>(device)) pools_.resize(device + 1);
    if (!pools_[device]) pools_[device] = std::make_unique<CorePool>(cores_);
    return *pools_[device];
  }
  int Cores(uint64_t generation) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation != generation_) {
      pools_.clear();
      generation_ = generation;
      cores_ = ReadCoreCount();
    }
    return cores_;
  }

 private:
  std::mutex mutex_;
  uint64_t generation_ = 0;
  int cores_ = kDefaultCoreCount;
  std::vector<std::unique_ptr<CorePool>> pools_;
};

// Task names ("kernel add_custom") and launch tags, kept for the life of the process: the stream, its
// watchdog and injected faults hold them by pointer (nrtLaunchHostFuncNamed). There are few distinct
// ones (a name per kernel, a tag per launching source line). Leaked, like the pools below.
const char* Intern(std::string_view text) {
  static auto* mutex = new std::mutex;
  static auto* strings = new std::unordered_set<std::string>;
  std::lock_guard<std::mutex> lock(*mutex);
  return strings->emplace(text).first->c_str();
}

// Leaked: kernel tasks may still run while static destructors do.
std::atomic<CorePools*> g_pools{new CorePools};
CorePools& Pools() { return *g_pools.load(std::memory_order_acquire); }

}  // namespace

// The parent's core threads do not exist in a forked child: joining them would fail, so the old
// pools are leaked and the child starts its own on demand.
void ForgetCorePoolsAfterFork() { g_pools.store(new CorePools); }

namespace {

struct KernelTask {
  std::string name;
  uint32_t block_dim;
  nrtKernelBlockFn block;
  void* args;
  void (*destroy_args)(void*);
  CorePool* pool;
  std::string tag;

  ~KernelTask() {
    if (destroy_args != nullptr) destroy_args(args);
  }
};

// Runs on the stream's worker: all blocks, then the verdict.
// Runs once per launch, or once per replay of a graph that captured it (ReleaseKernelTask frees it).
int RunKernelTask(void* data) {
  KernelTask* task = static_cast<KernelTask*>(data);
  std::mutex mutex;
  std::optional<std::pair<uint32_t, std::string>> first_failure;  // lowest failing block
  uint32_t failures = 0;
  task->pool->Run(task->block_dim, [&](uint32_t index) {
    t_block = {index, task->block_dim, {}};
    const int status = task->block(task->args);
    if (status != 0) {
      std::string message = t_block.error.empty()
                                ? StrCat("the block returned ", status)
                                : std::move(t_block.error);
      std::lock_guard<std::mutex> lock(mutex);
      ++failures;
      if (!first_failure || index < first_failure->first) first_failure.emplace(index, std::move(message));
    }
    t_block = {};
  });
  if (failures == 0) return 0;
  std::string message = StrCat("kernel ", task->name, " failed in block ", first_failure->first, " of ",
                               task->block_dim, ": ", first_failure->second);
  if (failures > 1) message += StrCat(" (and ", failures - 1, " more failed blocks)");
  if (!task->tag.empty()) message += " " + task->tag;
  nrtSetTaskErrMsg(message.c_str());
  return 1;
}

void ReleaseKernelTask(void* data) { delete static_cast<KernelTask*>(data); }

}  // namespace
}  // namespace npu::runtime

extern "C" {

nrtError_t nrtLaunchKernel(const char* name, uint32_t blockDim, nrtStream_t stream, nrtKernelBlockFn block,
                           void* args, void (*destroyArgs)(void* args)) {
  using namespace npu::runtime;
  // Owns args from here on, so that every path below releases them exactly once.
  auto task = std::unique_ptr<KernelTask>(
      new (std::nothrow) KernelTask{name ? name : "", blockDim, block, args, destroyArgs, nullptr, t_launch_tag});
  if (task == nullptr) {
    if (destroyArgs != nullptr) destroyArgs(args);
    return NPU_RT_FAIL(NRT_ERROR_OUT_OF_MEMORY, "nrtLaunchKernel: out of host memory");
  }
  const nrtError_t error = WithRuntime([&](Runtime& rt) {
    if (name == nullptr || block == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtLaunchKernel: ", name ? "block" : "name", " is NULL");
    }
    if (blockDim < 1 || blockDim > NRT_MAX_BLOCK_DIM) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "kernel ", name, ": blockDim ", blockDim,
                         " is outside [1, ", NRT_MAX_BLOCK_DIM, "]");
    }
    int32_t device = 0;
    if (nrtError_t failed = nrtStreamGetDevice(stream, &device)) return failed;
    task->pool = &Pools().For(rt.generation(), device);
    return NRT_SUCCESS;
  });
  if (error != NRT_SUCCESS) return error;
  // Named like the adapter's ops, so that failures, the watchdog and NPU_SIM_FAULT=...:op=<kernel> see it.
  const char* task_name = Intern(StrCat("kernel ", name));
  const char* site = task->tag.empty() ? nullptr : Intern(task->tag);
  KernelTask* queued = task.release();
  if (activity::Active()) activity::LabelNextHostFunc(NRT_ACTIVITY_KERNEL, name, 0, blockDim);
  // Owned: released after its run, or with the graph that captured it (also when refused).
  return nrtLaunchHostFuncOwned(stream, &RunKernelTask, queued, &ReleaseKernelTask, task_name, site, 0);
}

uint32_t nrtGetBlockIdx(void) { return npu::runtime::t_block.index; }

uint32_t nrtGetBlockNum(void) { return npu::runtime::t_block.count; }

void nrtSetBlockErrMsg(const char* message) {
  try {
    npu::runtime::t_block.error = message ? message : "";
  } catch (...) {
  }
}

void nrtSetKernelLaunchTag(const char* tag) {
  try {
    npu::runtime::t_launch_tag = tag ? tag : "";
  } catch (...) {
  }
}

nrtError_t nrtGetDeviceCoreCount(int32_t* count) {
  return npu::runtime::WithRuntime([&](npu::runtime::Runtime& rt) {
    if (count == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDeviceCoreCount: count is NULL");
    *count = npu::runtime::Pools().Cores(rt.generation());
    return NRT_SUCCESS;
  });
}

}  // extern "C"

// Runtime.cpp - implicit initialisation, nrtFinalize(), and the leaked global state between them.
#include "Runtime.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include <pthread.h>

#include "DeviceMemory.h"
#include "Error.h"
#include "Event.h"
#include "FaultInjection.h"
#include "Log.h"
#include "CorePool.h"
#include "Stream.h"
#include "StreamRegistry.h"

namespace npu::runtime {
namespace {

struct Lifecycle {
  std::mutex mu;  // serialises start-up and nrtFinalize()
  std::condition_variable changed;
  std::atomic<Runtime*> runtime{nullptr};
  std::atomic<int64_t> active_calls{0};
  std::atomic<bool> finalizing{false};
  uint64_t generations = 0;
};

// Leaked on purpose, together with the Runtime it points to: other libraries free device memory
// from their static destructors at exit, after which our own destructors would already have run.
std::atomic<Lifecycle*> g_lifecycle{nullptr};

// In a forked child only the forking thread exists: the parent's stream workers, core threads and
// whatever locks they held are gone. The child abandons (leaks) the parent's runtime and starts a
// fresh one at its next call; handles and device pointers from the parent are invalid there.
void ResetAfterFork() {
  Lifecycle* parent = g_lifecycle.load();
  auto* fresh = new Lifecycle;
  // A new generation: per-thread caches and current devices of the parent's runtime are ignored.
  fresh->generations = parent->generations + 1;
  g_lifecycle.store(fresh);
  ForgetCorePoolsAfterFork();
}

Lifecycle& GetLifecycle() {
  static const bool registered = [] {
    g_lifecycle.store(new Lifecycle);
    pthread_atfork(nullptr, nullptr, &ResetAfterFork);
    return true;
  }();
  (void)registered;
  return *g_lifecycle.load(std::memory_order_acquire);
}

Runtime* Start(Lifecycle& lifecycle) {
  std::lock_guard<std::mutex> lock(lifecycle.mu);
  if (lifecycle.finalizing.load()) return nullptr;
  if (Runtime* runtime = lifecycle.runtime.load()) return runtime;
  ConfigureLogging();
  auto* runtime = new Runtime(ReadConfigFromEnv(), ++lifecycle.generations);
  lifecycle.runtime.store(runtime);
  return runtime;
}

void ReleaseCall(Lifecycle& lifecycle) {
  // Seq-cst on both sides: either nrtFinalize() sees this decrement or we see its flag and wake it.
  if (lifecycle.active_calls.fetch_sub(1) == 1 && lifecycle.finalizing.load()) {
    std::lock_guard<std::mutex> lock(lifecycle.mu);
    lifecycle.changed.notify_all();
  }
}

}  // namespace

Runtime::Runtime(const Config& config, uint64_t generation)
    : config_(config),
      generation_(generation),
      faults_(FaultInjector::FromEnv()),
      task_timeout_ns_(ReadTaskTimeoutFromEnv().count()),
      memory_(std::make_unique<DeviceMemory>(config.device_count, config.memory_capacity)),
      streams_(std::make_unique<StreamRegistry>(config.device_count, generation,
                                                StreamOptions{faults_.get(), &task_timeout_ns_})),
      events_(std::make_unique<EventRegistry>()) {
  NPU_RT_LOG(kInfo, "software NPU started: ", config.device_count, " devices with ",
             FormatBytes(config.memory_capacity), " of memory each");
}

Runtime::~Runtime() {
  // Streams go first: queued copies and host functions may still touch events and memory.
  streams_->ShutdownAll();
  events_.reset();
  memory_.reset();
  NPU_RT_LOG(kInfo, "software NPU finalized");
}

RuntimeRef::RuntimeRef() {
  Lifecycle& lifecycle = GetLifecycle();
  lifecycle.active_calls.fetch_add(1);
  if (lifecycle.finalizing.load()) return;
  runtime_ = lifecycle.runtime.load();
  if (runtime_ != nullptr) return;
  try {
    runtime_ = Start(lifecycle);
  } catch (...) {
    ReleaseCall(lifecycle);
    throw;
  }
}

RuntimeRef::~RuntimeRef() { ReleaseCall(GetLifecycle()); }

nrtError_t FailNotInitialized() {
  return NPU_RT_FAIL(NRT_ERROR_NOT_INITIALIZED,
                     "the runtime is being finalized (nrtFinalize() is in progress); calls made "
                     "meanwhile, including from host functions still draining, are rejected");
}

nrtError_t FailWithException(nrtError_t code, const char* what) {
  return NPU_RT_FAIL(code, "the runtime could not complete the call: ", what);
}

}  // namespace npu::runtime

extern "C" {

nrtError_t nrtInit(void) {
  return npu::runtime::WithRuntime([](npu::runtime::Runtime&) { return NRT_SUCCESS; });
}

nrtError_t nrtSetTaskTimeout(uint64_t timeout_ms) {
  return npu::runtime::WithRuntime([&](npu::runtime::Runtime& rt) {
    constexpr uint64_t kMaxMs = 1000ull * 1000 * 1000 * 1000;  // ~31 years: ns still fit in int64
    if (timeout_ms > kMaxMs) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtSetTaskTimeout: ", timeout_ms, " ms is too large");
    }
    rt.task_timeout_ns().store(static_cast<int64_t>(timeout_ms) * 1000000, std::memory_order_relaxed);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetTaskTimeout(uint64_t* timeout_ms) {
  if (timeout_ms == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetTaskTimeout: timeout_ms is NULL");
  return npu::runtime::WithRuntime([&](npu::runtime::Runtime& rt) {
    *timeout_ms = static_cast<uint64_t>(rt.task_timeout_ns().load(std::memory_order_relaxed) / 1000000);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtFinalize(void) {
  using npu::runtime::GetLifecycle;
  if (npu::runtime::OnAnyStreamWorker()) {
    return NPU_RT_FAIL(
        NRT_ERROR_INVALID_VALUE,
        "nrtFinalize() cannot run inside a host function: it waits for every stream, "
        "including the one running the caller");
  }
  auto& lifecycle = GetLifecycle();
  std::unique_lock<std::mutex> lock(lifecycle.mu);
  lifecycle.changed.wait(lock, [&] { return !lifecycle.finalizing.load(); });
  npu::runtime::Runtime* runtime = lifecycle.runtime.load();
  if (runtime == nullptr) return NRT_SUCCESS;
  lifecycle.finalizing.store(true);
  lifecycle.changed.wait(lock, [&] { return lifecycle.active_calls.load() == 0; });
  lifecycle.runtime.store(nullptr);
  // Unlocked while draining so that host functions calling the API get NOT_INITIALIZED instead of
  // deadlocking on the lock.
  lock.unlock();
  delete runtime;
  lock.lock();
  lifecycle.finalizing.store(false);
  lifecycle.changed.notify_all();
  return NRT_SUCCESS;
}

}  // extern "C"

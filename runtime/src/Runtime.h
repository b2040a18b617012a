// Runtime.h - the process-wide runtime state, its implicit start-up, and the guard every API call
// uses.
#ifndef NPU_RUNTIME_SRC_RUNTIME_H_
#define NPU_RUNTIME_SRC_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <system_error>

#include "Device.h"
#include "npu/runtime.h"

namespace npu::runtime {

class DeviceMemory;
class FaultInjector;
class EventRegistry;
class StreamRegistry;

class Runtime {
 public:
  Runtime(const Config& config, uint64_t generation);
  ~Runtime();  // drains every stream first, then releases events and memory
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Config& config() const { return config_; }
  // Distinguishes runtimes across nrtFinalize() so thread-local state of an old one is ignored.
  uint64_t generation() const { return generation_; }
  int current_device() const { return CurrentDevice(generation_); }

  DeviceMemory& memory() { return *memory_; }
  StreamRegistry& streams() { return *streams_; }
  EventRegistry& events() { return *events_; }
  // Injected faults (NPU_SIM_FAULT); nullptr when none are configured.
  FaultInjector* faults() { return faults_.get(); }
  // The watchdog's limit on one task (NPU_SIM_TASK_TIMEOUT, then nrtSetTaskTimeout); 0: off.
  std::atomic<int64_t>& task_timeout_ns() { return task_timeout_ns_; }

 private:
  const Config config_;
  const uint64_t generation_;
  std::unique_ptr<FaultInjector> faults_;  // outlives the streams that consult it
  std::atomic<int64_t> task_timeout_ns_;   // likewise
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<StreamRegistry> streams_;
  std::unique_ptr<EventRegistry> events_;
};

// Pins the runtime for one API call (initialising it on first use) so that nrtFinalize() waits for
// the call instead of freeing state under it. get() is nullptr while nrtFinalize() is tearing down.
class RuntimeRef {
 public:
  RuntimeRef();
  ~RuntimeRef();
  RuntimeRef(const RuntimeRef&) = delete;
  RuntimeRef& operator=(const RuntimeRef&) = delete;
  Runtime* get() const { return runtime_; }

 private:
  Runtime* runtime_ = nullptr;
};

nrtError_t FailNotInitialized();
nrtError_t FailWithException(nrtError_t code, const char* what);

// Runs one C API body against the live runtime. C++ exceptions must never cross the C boundary,
// so the few that can happen (host allocation, thread creation) become error codes here.
template <typename Body>
nrtError_t WithRuntime(Body&& body) noexcept {
  try {
    RuntimeRef ref;
    if (ref.get() == nullptr) return FailNotInitialized();
    return body(*ref.get());
  } catch (const std::bad_alloc& e) {
    return FailWithException(NRT_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const std::system_error& e) {
    return FailWithException(NRT_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const std::exception& e) {
    return FailWithException(NRT_ERROR_INVALID_VALUE, e.what());
  } catch (...) {
    return FailWithException(NRT_ERROR_INVALID_VALUE, "unknown exception");
  }
}

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_RUNTIME_H_

// FaultInjection.h - injected device faults (NPU_SIM_FAULT) and the stuck-task watchdog setting
// (NPU_SIM_TASK_TIMEOUT), so that code handling device errors can be tested on the software NPU.
#ifndef NPU_RUNTIME_SRC_FAULT_INJECTION_H_
#define NPU_RUNTIME_SRC_FAULT_INJECTION_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "npu/runtime.h"

namespace npu::runtime {

enum class FaultKind { kTaskFail, kOom, kMemcpyFail, kHang, kDeviceLost, kSlow };

// One `kind:key=value:...` item of NPU_SIM_FAULT. Matching events are counted per rule; the rule
// fires for events after+1 .. after+count (count 0: every one from after+1 on).
struct FaultRule {
  FaultKind kind;
  std::string text;  // as written, for messages
  std::string op;    // "" matches any task
  int device = -1;   // -1 matches any device
  uint64_t after = 0;
  uint64_t count = 1;
  double factor = 1.0;  // slow
  std::atomic<uint64_t> seen{0};
  std::atomic<uint64_t> matched{0};  // events that matched (op= and device=), fired or not

  bool Fires();  // counts one matching event
};

// What launched a task, beyond its own name: the ATen ops the launching thread is inside
// (nrtPushLaunchOrigin), so that `op=mul` matches the aclnnMuls that `x * 2` launches.
struct LaunchOrigins {
  static constexpr int kMax = 8;
  const char* names[kMax];
  int count = 0;
};
LaunchOrigins& CurrentLaunchOrigins();

// "\n  launched from train.py:42" for a location, " (launched from ...)" for a launch tag as the op
// library keeps it; "" without a site.
std::string LaunchSuffix(const char* site);

// What a task about to be reported complete must do.
struct TaskFault {
  std::optional<std::string> failure;  // fail with this message
  bool hang = false;                   // never finish (until the stream shuts down)
  double slow_factor = 1.0;            // take this many times as long
};

class FaultInjector {
 public:
  FaultInjector() = default;
  ~FaultInjector();  // reports faults with op= that matched no task (stderr)
  // Parses NPU_SIM_FAULT; nullptr when it is unset or empty. A malformed value throws
  // std::invalid_argument naming what is wrong: the runtime then refuses to start.
  static std::unique_ptr<FaultInjector> FromEnv();
  // The same for a given text; on a malformed one returns nullptr and sets *error.
  static std::unique_ptr<FaultInjector> Parse(std::string_view spec, std::string* error);

  // Which op= rules a task named `op` (may be null), launched now from this thread, matches: bit i
  // for rule i. Taken at launch, where the launching ATen ops are known.
  uint32_t MatchAtLaunch(const char* op) const;
  // A task named `op` that matched `matches` ran on `stream_name` of `device`: the fault to apply.
  TaskFault OnTask(int device, const char* op, uint32_t matches, const std::string& stream_name);
  bool has_op_rules() const { return has_op_rules_; }
  // "" when every fault with op= matched some task; otherwise one line per fault that did not, with
  // the names of the tasks that ran (so that the right op= can be chosen).
  std::string UnmatchedReport() const;
  // An allocation (nrtMalloc / nrtMapMem) on `device`: NRT_ERROR_OUT_OF_MEMORY when injected.
  nrtError_t OnAllocate(int device, size_t size);
  // A copy on `device`: the failure message when injected.
  std::optional<std::string> OnMemcpy(int device);
  bool any_memcpy() const { return has_memcpy_; }

  bool Lost(int device) const {
    return device >= 0 && device < kMaxDevices && lost_[device].load(std::memory_order_acquire);
  }
  // NRT_ERROR_DEVICE_LOST naming the device and the rule that lost it.
  nrtError_t FailLost(int device, std::string_view call) const;
  std::string LostMessage(int device) const;

 private:
  static constexpr int kMaxDevices = 128;
  void MarkLost(int device, const FaultRule& rule);

  std::vector<std::unique_ptr<FaultRule>> rules_;
  bool has_memcpy_ = false;
  bool has_op_rules_ = false;
  // Distinct names of tasks seen (capped), for the report of faults that matched nothing.
  mutable std::mutex names_mu_;
  std::set<std::string> task_names_;
  std::array<std::atomic<bool>, kMaxDevices> lost_{};
  std::array<std::atomic<const FaultRule*>, kMaxDevices> lost_by_{};
};

// NPU_SIM_TASK_TIMEOUT in seconds (fractions allowed); zero (the default) turns the watchdog off.
std::chrono::nanoseconds ReadTaskTimeoutFromEnv();

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_FAULT_INJECTION_H_

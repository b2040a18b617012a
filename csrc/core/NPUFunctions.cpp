// NPUFunctions.cpp - device count / current device with PyTorch-style errors.
#include "csrc/core/NPUFunctions.h"

#include <cstdlib>
#include <string>

#include "csrc/core/NPUBlockingWait.h"
#include "csrc/core/NPUThreadTeams.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUTrace.h"

namespace c10_npu {

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = [] {
    int32_t n = 0;
    return nrtGetDeviceCount(&n) == NRT_SUCCESS ? static_cast<c10::DeviceIndex>(n)
                                                : c10::DeviceIndex{0};
  }();
  return count;
}

namespace {
// "2 devices are configured (NPU_SIM_DEVICES=...)", or visible through ASCEND_RT_VISIBLE_DEVICES.
std::string devicesText() {
  const char* env = std::getenv("NPU_SIM_DEVICES");
  const char* visible = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
  const int count = static_cast<int>(device_count());
  const std::string counted = c10::str(count, count == 1 ? " device is" : " devices are");
  const std::string sim = c10::str("NPU_SIM_DEVICES=", env ? env : "unset, default 8");
  if (visible != nullptr) {
    return c10::str(counted, " visible (ASCEND_RT_VISIBLE_DEVICES=\"", visible, "\" of ", sim,
                    "): use an index in [0, ", count, ")");
  }
  return c10::str(counted, " configured (", sim, "): use an index in [0, ", count, ")");
}
}  // namespace

void check_device_index(c10::DeviceIndex device) {
  if (C10_LIKELY(device >= 0 && device < device_count())) return;
  const std::string configured = devicesText();
  if (device < -1) {
    // torch.device keeps the index in 8 bits, so "npu:999" arrives here as -25: name what it was.
    std::string written;
    for (int index = static_cast<int>(device) + 256; index < 1024; index += 256) {
      written += c10::str(written.empty() ? "" : ", ", "npu:", index);
    }
    TORCH_CHECK(false, "the npu device index is out of range: torch.device stores indices in 8 bits, so the "
                "index written (", written, ", ...) wrapped around to ", static_cast<int>(device), "; ",
                configured);
  }
  TORCH_CHECK(false, "npu:", static_cast<int>(device), " does not exist: ", configured);
}

c10::DeviceIndex checked_device_index(int64_t device) {
  if (device >= 0 && device < device_count()) return static_cast<c10::DeviceIndex>(device);
  TORCH_CHECK(false, "npu:", device, " does not exist: ", devicesText());
}

namespace {
// The runtime's current device of this thread, mirrored here: every op launch and allocation asks
// for it. -1 until this thread first asks or sets it.
thread_local c10::DeviceIndex t_current_device = -1;
// The forking thread's device, selected again in the child's runtime at its first use.
c10::DeviceIndex t_device_before_fork = -1;
}  // namespace

void forgetCurrentDeviceAfterFork() noexcept {
  t_device_before_fork = t_current_device;
  t_current_device = -1;
}

c10::DeviceIndex current_device() {
  if (C10_LIKELY(t_current_device >= 0)) return t_current_device;
  if (t_device_before_fork >= 0) {
    const c10::DeviceIndex device = t_device_before_fork;
    t_device_before_fork = -1;
    if (nrtSetDevice(device) == NRT_SUCCESS) return t_current_device = device;
  }
  int32_t device = 0;
  NPU_CHECK(nrtGetDevice(&device));
  t_current_device = static_cast<c10::DeviceIndex>(device);
  return t_current_device;
}

void set_device(c10::DeviceIndex device) {
  check_device_index(device);
  NPU_CHECK(nrtSetDevice(device));
  t_current_device = device;
}

void set_device_unchecked(c10::DeviceIndex device) noexcept {
  // Device guards restore the device on every exit, mostly to the one already current.
  if (device == t_current_device) return;
  t_current_device = nrtSetDevice(device) == NRT_SUCCESS ? device : c10::DeviceIndex{-1};
}

void device_synchronize(c10::DeviceIndex device) {
  check_device_index(device);
  const c10::DeviceIndex prev = current_device();
  if (prev != device) NPU_CHECK(nrtSetDevice(device));
  nrtError_t err;
  {
    BlockingWaitScope wait;
    noteBlockingWait();
    err = nrtDeviceSynchronize();
  }
  if (prev != device) nrtSetDevice(prev);
  NPU_CHECK(err);
  trace::deviceSynchronized();
}

}  // namespace c10_npu

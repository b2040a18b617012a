// NPUFunctions.cpp - device count / current device with PyTorch-style errors.
#include "csrc/core/NPUFunctions.h"

#include <cstdlib>

#include "csrc/core/NPUException.h"

namespace c10_npu {

c10::DeviceIndex device_count() noexcept {
  static const c10::DeviceIndex count = [] {
    int32_t n = 0;
    return nrtGetDeviceCount(&n) == NRT_SUCCESS ? static_cast<c10::DeviceIndex>(n)
                                                : c10::DeviceIndex{0};
  }();
  return count;
}

void check_device_index(c10::DeviceIndex device) {
  if (C10_LIKELY(device >= 0 && device < device_count())) return;
  const char* env = std::getenv("NPU_SIM_DEVICES");
  TORCH_CHECK(false, "npu:", static_cast<int>(device), " does not exist: ",
              static_cast<int>(device_count()), " devices are configured",
              " (NPU_SIM_DEVICES=", env ? env : "unset, default 8", ")");
}

c10::DeviceIndex current_device() {
  int32_t device = 0;
  NPU_CHECK(nrtGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void set_device(c10::DeviceIndex device) {
  check_device_index(device);
  NPU_CHECK(nrtSetDevice(device));
}

void device_synchronize(c10::DeviceIndex device) {
  check_device_index(device);
  int32_t prev = 0;
  NPU_CHECK(nrtGetDevice(&prev));
  NPU_CHECK(nrtSetDevice(device));
  nrtError_t err = nrtDeviceSynchronize();
  nrtSetDevice(prev);
  NPU_CHECK(err);
}

}  // namespace c10_npu

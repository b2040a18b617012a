// NPUFunctions.h - device count / current device with PyTorch-style errors.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace c10_npu {

c10::DeviceIndex device_count() noexcept;  // 0 if the runtime cannot start
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
// For device guards: no checks, no exception (a failure leaves the device unknown, asked again).
void set_device_unchecked(c10::DeviceIndex device) noexcept;
// Throws a clear error for an index outside [0, device_count()).
void check_device_index(c10::DeviceIndex device);
void device_synchronize(c10::DeviceIndex device);

// torch_npu's ACL-style spellings, for extensions: 0 on success.
inline int GetDevice(int32_t* device) {
  *device = current_device();
  return 0;
}

}  // namespace c10_npu

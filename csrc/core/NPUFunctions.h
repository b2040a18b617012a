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
// The same for an index as the caller wrote it (an int from Python), before it is narrowed to
// c10::DeviceIndex (8 bits: 999 would become -25); returns it narrowed.
c10::DeviceIndex checked_device_index(int64_t device);
void device_synchronize(c10::DeviceIndex device);

// In a forked child (csrc/core/NPUForkHandler.cpp): the runtime starts afresh there, so the adapter
// forgets the parent's streams, cached memory and pinned buffers, and re-selects this thread's device.
void forgetParentStateAfterFork() noexcept;
void forgetCurrentDeviceAfterFork() noexcept;
void forgetStreamsAfterFork() noexcept;
void forgetPinnedMemoryAfterFork() noexcept;
namespace NPUCachingAllocator {
void forgetCachedMemoryAfterFork() noexcept;
}

// torch_npu's ACL-style spellings, for extensions: 0 on success.
inline int GetDevice(int32_t* device) {
  *device = current_device();
  return 0;
}

}  // namespace c10_npu

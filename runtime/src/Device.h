// Device.h - device configuration from the environment and the per-thread current device.
#ifndef NPU_RUNTIME_SRC_DEVICE_H_
#define NPU_RUNTIME_SRC_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "npu/runtime.h"

namespace npu::runtime {

struct SocSpec;

struct Config {
  int device_count;        // the devices this process sees (ASCEND_RT_VISIBLE_DEVICES of NPU_SIM_DEVICES)
  size_t memory_capacity;  // bytes per device
  std::string soc_name;    // NPU_SIM_SOC_VERSION
  const SocSpec* soc;      // nullptr when soc_name is unknown (nrtGetSocName reports it)
  std::string cann_version;  // NPU_SIM_CANN_VERSION (nrtGetCannVersion checks it)
  int physical_count = 0;    // NPU_SIM_DEVICES
  std::optional<std::string> visible_devices;  // ASCEND_RT_VISIBLE_DEVICES as set, if set
};

// ASCEND_RT_VISIBLE_DEVICES as Ascend's runtime reads it: device ids separated by commas, read up to
// the first other character or empty entry; the ids must ascend (otherwise no device is visible) and
// the list ends at the first id not below `physical_count`. Unset: every device. Returns the ids.
std::vector<int> ParseVisibleDevices(const std::optional<std::string>& text, int physical_count);

// Reads NPU_SIM_DEVICES and NPU_SIM_MEMORY (invalid values are logged and replaced by defaults),
// NPU_SIM_SOC_VERSION and NPU_SIM_CANN_VERSION (invalid values fail the calls that report them).
Config ReadConfigFromEnv();

// The current device belongs to the runtime generation that set it: after nrtFinalize() every
// thread falls back to device 0 instead of keeping an index the new configuration may not have.
int CurrentDevice(uint64_t generation);
void SetCurrentDevice(uint64_t generation, int device);

// NRT_SUCCESS, or NRT_ERROR_INVALID_DEVICE with a message naming the configured count.
nrtError_t CheckDevice(const Config& config, int64_t device);

// "1073741824", "64M", "16G", "512KiB", "2GB" (binary multiples); nullopt for anything else or 0.
std::optional<size_t> ParseByteSize(std::string_view text);

// "64.00 MiB"; used wherever sizes appear in messages.
std::string FormatBytes(size_t bytes);

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_DEVICE_H_

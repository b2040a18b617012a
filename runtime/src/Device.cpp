// Device.cpp - device count and memory size from the environment, current device, device C API.
#include "Device.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <optional>
#include <string_view>

#include "DeviceBusy.h"
#include "Error.h"
#include "FaultInjection.h"
#include "Runtime.h"
#include "SocInfo.h"

namespace npu::runtime {
namespace {

constexpr int kDefaultDeviceCount = 8;
// PyTorch device indices are int8_t, so more devices could not be addressed anyway.
constexpr int kMaxDeviceCount = 128;
constexpr size_t kDefaultMemoryCapacity = size_t{16} << 30;

struct ThreadDevice {
  uint64_t generation = 0;
  int device = 0;
};
thread_local ThreadDevice t_device;

std::optional<int> ParseDeviceCount(std::string_view text) {
  int count = 0;
  if (text.empty() || text.size() > 4) return std::nullopt;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    count = count * 10 + (c - '0');
  }
  if (count < 1 || count > kMaxDeviceCount) return std::nullopt;
  return count;
}

}  // namespace

// Accepts "1073741824", "64M", "16G", "1t", "512KiB", "2GB": binary multiples, as memory sizes are.
std::optional<size_t> ParseByteSize(std::string_view text) {
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(text[digits] - '0'), &value)) {
      return std::nullopt;
    }
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  std::string_view suffix = text.substr(digits);
  int shift = 0;
  if (!suffix.empty()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
    const std::string_view units = "KMGT";
    const size_t index = units.find(unit);
    if (index != std::string_view::npos) {
      shift = 10 * static_cast<int>(index + 1);
      suffix.remove_prefix(1);
    }
  }
  if (!(suffix.empty() || suffix == "B" || suffix == "b" || suffix == "iB" || suffix == "ib")) {
    return std::nullopt;
  }
  if (value == 0 || (shift > 0 && (value >> (64 - shift)) != 0)) return std::nullopt;
  return static_cast<size_t>(value << shift);
}


std::vector<int> ParseVisibleDevices(const std::optional<std::string>& text, int physical_count) {
  std::vector<int> ids;
  if (!text.has_value()) {
    for (int i = 0; i < physical_count; ++i) ids.push_back(i);
    return ids;
  }
  const std::string& var = *text;
  size_t end = 0;
  while (end < var.size() && (std::isdigit(static_cast<unsigned char>(var[end])) || var[end] == ',')) ++end;
  size_t start = 0;
  while (start <= end) {
    const size_t comma = std::min(var.find(',', start), end);
    if (comma == start) break;  // an empty entry ends the list
    const std::string entry = var.substr(start, comma - start);
    const long long id = entry.size() > 9 ? physical_count : std::stoll(entry);
    if (!ids.empty() && id <= ids.back()) return {};  // the runtime takes ascending ids only
    if (id >= physical_count) break;
    ids.push_back(static_cast<int>(id));
    start = comma + 1;
  }
  return ids;
}

Config ReadConfigFromEnv() {
  Config config{kDefaultDeviceCount, kDefaultMemoryCapacity, kDefaultSocName, nullptr,
                kDefaultCannVersion};
  if (const char* text = std::getenv("NPU_SIM_DEVICES")) {
    if (auto count = ParseDeviceCount(text)) {
      config.device_count = *count;
    } else {
      NPU_RT_LOG(kWarning, "ignoring NPU_SIM_DEVICES=\"", text,
                 "\": expected a device count in [1, ", kMaxDeviceCount, "]; using the default of ",
                 kDefaultDeviceCount, " devices");
    }
  }
  config.physical_count = config.device_count;
  if (const char* text = std::getenv("ASCEND_RT_VISIBLE_DEVICES")) {
    config.visible_devices = std::string(text);
    config.device_count = static_cast<int>(ParseVisibleDevices(config.visible_devices, config.physical_count).size());
  }
  if (const char* text = std::getenv("NPU_SIM_MEMORY")) {
    if (auto bytes = ParseByteSize(text)) {
      config.memory_capacity = *bytes;
    } else {
      NPU_RT_LOG(
          kWarning, "ignoring NPU_SIM_MEMORY=\"", text,
          "\": expected bytes or a size with a K/M/G/T suffix such as 16G; using the default of ",
          FormatBytes(kDefaultMemoryCapacity), " per device");
    }
  }
  if (const char* text = std::getenv("NPU_SIM_SOC_VERSION"); text != nullptr && *text != '\0') {
    config.soc_name = text;
  }
  config.soc = FindSoc(config.soc_name);
  if (const char* text = std::getenv("NPU_SIM_CANN_VERSION"); text != nullptr && *text != '\0') {
    config.cann_version = text;
  }
  return config;
}

int CurrentDevice(uint64_t generation) {
  return t_device.generation == generation ? t_device.device : 0;
}

void SetCurrentDevice(uint64_t generation, int device) { t_device = {generation, device}; }

nrtError_t CheckDevice(const Config& config, int64_t device) {
  if (device >= 0 && device < config.device_count) return NRT_SUCCESS;
  if (config.visible_devices.has_value()) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_DEVICE, "npu:", device, " does not exist: ", config.device_count,
                       config.device_count == 1 ? " device is" : " devices are", " visible (ASCEND_RT_VISIBLE_DEVICES=\"",
                       *config.visible_devices, "\" of NPU_SIM_DEVICES=", config.physical_count,
                       "; the list is read up to its first entry that is not an ascending id below the device count)");
  }
  return NPU_RT_FAIL(NRT_ERROR_INVALID_DEVICE, "npu:", device,
                     " does not exist: ", config.device_count,
                     config.device_count == 1 ? " device is" : " devices are",
                     " configured (NPU_SIM_DEVICES=", config.device_count,
                     "); use an index in [0, ", config.device_count, ") or raise NPU_SIM_DEVICES");
}

std::string FormatBytes(size_t bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return StrCat(bytes, " bytes");
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, kUnits[unit]);
  return text;
}

}  // namespace npu::runtime

using npu::runtime::Runtime;

extern "C" {

nrtError_t nrtGetDeviceCount(int32_t* count) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (count == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDeviceCount: count is NULL");
    }
    *count = rt.config().device_count;
    return NRT_SUCCESS;
  });
}

nrtError_t nrtSetDevice(int32_t device) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (nrtError_t error = npu::runtime::CheckDevice(rt.config(), device)) return error;
    npu::runtime::SetCurrentDevice(rt.generation(), device);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetDevice(int32_t* device) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (device == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDevice: device is NULL");
    }
    *device = npu::runtime::CurrentDevice(rt.generation());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetDeviceStatus(int32_t device, nrtDeviceStatus* status) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (status == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDeviceStatus: status is NULL");
    }
    if (nrtError_t error = npu::runtime::CheckDevice(rt.config(), device)) return error;
    const bool lost = rt.faults() != nullptr && rt.faults()->Lost(device);
    *status = lost ? NRT_DEVICE_LOST : NRT_DEVICE_OK;
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetDeviceUtilization(int32_t device, int32_t* percent) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (percent == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDeviceUtilization: percent is NULL");
    }
    if (nrtError_t error = npu::runtime::CheckDevice(rt.config(), device)) return error;
    *percent = npu::runtime::busy::UtilizationSinceLastQuery(device);
    return NRT_SUCCESS;
  });
}

void nrtPushLaunchOrigin(const char* name) {
  npu::runtime::LaunchOrigins& origins = npu::runtime::CurrentLaunchOrigins();
  if (origins.count < npu::runtime::LaunchOrigins::kMax) origins.names[origins.count] = name;
  ++origins.count;  // deeper nesting is counted, so that pops stay paired
}

void nrtPopLaunchOrigin(void) {
  npu::runtime::LaunchOrigins& origins = npu::runtime::CurrentLaunchOrigins();
  if (origins.count > 0) --origins.count;
}

int nrtFaultsMatchLaunchOrigins(void) {
  int active = 0;
  npu::runtime::WithRuntime([&](Runtime& rt) {
    active = rt.faults() != nullptr && rt.faults()->has_op_rules() ? 1 : 0;
    return NRT_SUCCESS;
  });
  return active;
}

nrtError_t nrtGetUnmatchedFaults(char* text, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (text == nullptr || size == 0) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetUnmatchedFaults: text is NULL or size is 0");
    }
    const std::string report = rt.faults() != nullptr ? rt.faults()->UnmatchedReport() : std::string();
    const size_t n = std::min(report.size(), size - 1);
    std::memcpy(text, report.data(), n);
    text[n] = '\0';
    return NRT_SUCCESS;
  });
}

}  // extern "C"

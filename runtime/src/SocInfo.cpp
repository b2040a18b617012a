// SocInfo.cpp - the SoCs the software NPU can pose as, and nrtGetSocName / nrtGetCannVersion /
// nrtGetDeviceProperties.
#include "SocInfo.h"

#include <cctype>
#include <cstring>
#include <vector>

#include "Device.h"
#include "Error.h"
#include "Runtime.h"

namespace npu::runtime {
namespace {

// Names as the CANN runtime reports them (aclrtGetSocName); core counts are nominal.
constexpr SocSpec kSocs[] = {
    {"Ascend910PremiumA", 32, 0}, {"Ascend910ProA", 32, 0},    {"Ascend910A", 30, 0},
    {"Ascend910ProB", 32, 0},     {"Ascend910B", 30, 0},       {"Ascend310P1", 10, 0},
    {"Ascend310P2", 10, 0},       {"Ascend310P3", 8, 0},       {"Ascend310P4", 8, 0},
    {"Ascend310P5", 10, 0},       {"Ascend310P7", 10, 0},      {"Ascend910B1", 24, 48},
    {"Ascend910B2", 24, 48},      {"Ascend910B2C", 24, 48},    {"Ascend910B3", 20, 40},
    {"Ascend910B4", 20, 40},      {"Ascend910B4-1", 20, 40},   {"Ascend310B1", 1, 1},
    {"Ascend310B2", 1, 1},        {"Ascend310B3", 1, 1},       {"Ascend310B4", 1, 1},
    {"Ascend910_9391", 24, 48},   {"Ascend910_9392", 24, 48},  {"Ascend910_9381", 24, 48},
    {"Ascend910_9382", 24, 48},   {"Ascend910_9372", 20, 40},  {"Ascend910_9362", 20, 40},
    {"Ascend910_9363", 20, 40},
};
// Every "Ascend950..." name is an Ascend950 part.
constexpr SocSpec kAscend950 = {"Ascend950", 32, 64};

bool AllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == sep) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

}  // namespace

const SocSpec* FindSoc(const std::string& name) {
  for (const SocSpec& soc : kSocs) {
    if (name == soc.name) return &soc;
  }
  return name.compare(0, 9, kAscend950.name) == 0 ? &kAscend950 : nullptr;
}

std::string KnownSocNames() {
  std::string names;
  for (const SocSpec& soc : kSocs) {
    if (!names.empty()) names += ", ";
    names += soc.name;
  }
  return names + ", Ascend950*";
}

bool IsCannVersion(const std::string& text) {
  const std::vector<std::string> parts = Split(text, '.');
  if (parts.size() < 3 || parts.size() > 4 || !AllDigits(parts[0]) || !AllDigits(parts[1])) return false;
  const std::string& third = parts[2];
  const bool release = AllDigits(third);
  const bool rc = third.size() > 2 && third.compare(0, 2, "RC") == 0 && AllDigits(third.substr(2));
  const bool test = third.size() > 1 && third[0] == 'T' && AllDigits(third.substr(1));
  return release || rc || test;
}

}  // namespace npu::runtime

using npu::runtime::Runtime;

extern "C" {

nrtError_t nrtGetSocName(const char** name) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (name == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetSocName: name is NULL");
    const npu::runtime::Config& config = rt.config();
    if (config.soc == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "NPU_SIM_SOC_VERSION=\"", config.soc_name,
                         "\" is not a SoC the software NPU knows; use one of ",
                         npu::runtime::KnownSocNames(), " (default ", npu::runtime::kDefaultSocName,
                         ")");
    }
    *name = config.soc_name.c_str();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetCannVersion(const char** version) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (version == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetCannVersion: version is NULL");
    }
    const npu::runtime::Config& config = rt.config();
    if (!npu::runtime::IsCannVersion(config.cann_version)) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "NPU_SIM_CANN_VERSION=\"", config.cann_version,
                         "\" is not a CANN version; use major.minor.release (8.5.0) or "
                         "major.minor.RCn (8.2.RC1)");
    }
    *version = config.cann_version.c_str();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGetDeviceProperties(int32_t device, nrtDeviceProp* prop) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (prop == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGetDeviceProperties: prop is NULL");
    }
    if (nrtError_t error = npu::runtime::CheckDevice(rt.config(), device)) return error;
    const char* name = nullptr;
    if (nrtError_t error = nrtGetSocName(&name)) return error;
    const npu::runtime::SocSpec& soc = *rt.config().soc;
    std::memset(prop, 0, sizeof(*prop));
    std::strncpy(prop->name, name, sizeof(prop->name) - 1);
    prop->total_memory = rt.config().memory_capacity;
    prop->cube_core_num = soc.cube_core_num;
    prop->vector_core_num = soc.vector_core_num;
    return NRT_SUCCESS;
  });
}

}  // extern "C"

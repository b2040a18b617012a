// NPUDeviceInfo.cpp - SoC / CANN version from the runtime, version comparison, named options.
#include "csrc/core/NPUDeviceInfo.h"

#include <c10/util/Exception.h>
#include <npu/runtime.h>

#include <cctype>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "csrc/core/NPUException.h"

namespace c10_npu {
namespace {

SocVersion SocVersionOf(const std::string& name) {
  static const std::map<std::string, SocVersion> kVersions = {
      {"Ascend910PremiumA", SocVersion::Ascend910PremiumA}, {"Ascend910ProA", SocVersion::Ascend910ProA},
      {"Ascend910A", SocVersion::Ascend910A},               {"Ascend910ProB", SocVersion::Ascend910ProB},
      {"Ascend910B", SocVersion::Ascend910B},               {"Ascend310P1", SocVersion::Ascend310P1},
      {"Ascend310P2", SocVersion::Ascend310P2},             {"Ascend310P3", SocVersion::Ascend310P3},
      {"Ascend310P4", SocVersion::Ascend310P4},             {"Ascend310P5", SocVersion::Ascend310P5},
      {"Ascend310P7", SocVersion::Ascend310P7},             {"Ascend910B1", SocVersion::Ascend910B1},
      {"Ascend910B2", SocVersion::Ascend910B2},             {"Ascend910B2C", SocVersion::Ascend910B2C},
      {"Ascend910B3", SocVersion::Ascend910B3},             {"Ascend910B4", SocVersion::Ascend910B4},
      {"Ascend910B4-1", SocVersion::Ascend910B4_1},         {"Ascend310B1", SocVersion::Ascend310B1},
      {"Ascend310B2", SocVersion::Ascend310B2},             {"Ascend310B3", SocVersion::Ascend310B3},
      {"Ascend310B4", SocVersion::Ascend310B4},             {"Ascend910_9391", SocVersion::Ascend910_9391},
      {"Ascend910_9392", SocVersion::Ascend910_9392},       {"Ascend910_9381", SocVersion::Ascend910_9381},
      {"Ascend910_9382", SocVersion::Ascend910_9382},       {"Ascend910_9372", SocVersion::Ascend910_9372},
      {"Ascend910_9362", SocVersion::Ascend910_9362},       {"Ascend910_9363", SocVersion::Ascend910_9363}};
  auto it = kVersions.find(name);
  if (it != kVersions.end()) return it->second;
  if (name.rfind("Ascend950", 0) == 0) return SocVersion::Ascend950;
  return SocVersion::UnsupportedSocVersion;
}

// (major, minor, stage, number, suffix): stage 0 = test build Tn, 1 = RCn, 2 = release n.
using VersionKey = std::tuple<int64_t, int64_t, int, int64_t, int64_t>;

bool Digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::optional<VersionKey> ParseVersion(const std::string& text) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == '.' || c == '-') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  if (parts.size() < 3 || !Digits(parts[0]) || !Digits(parts[1])) return std::nullopt;
  const std::string& third = parts[2];
  int stage = 0;
  std::string number;
  if (Digits(third)) {
    stage = 2, number = third;
  } else if (third.size() > 2 && (third[0] == 'R' || third[0] == 'r') && (third[1] == 'C' || third[1] == 'c')) {
    stage = 1, number = third.substr(2);
  } else if (third.size() > 1 && (third[0] == 'T' || third[0] == 't')) {
    stage = 0, number = third.substr(1);
  }
  if (!Digits(number)) return std::nullopt;
  // A fourth part ("alpha002") marks a pre-release of the version before it.
  int64_t suffix = 0;
  if (parts.size() > 3) {
    std::string digits;
    for (char c : parts[3]) {
      if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
    }
    suffix = -1000000 + (digits.empty() ? 0 : std::stoll(digits.substr(0, 9)));
  }
  return VersionKey{std::stoll(parts[0]), std::stoll(parts[1]), stage, std::stoll(number), suffix};
}

std::mutex& OptionsMutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::string>& Options() {
  static std::map<std::string, std::string> options;
  return options;
}

}  // namespace

std::string GetSocName() {
  const char* name = nullptr;
  NPU_CHECK(nrtGetSocName(&name));
  return name;
}

SocVersion GetSocVersion() { return SocVersionOf(GetSocName()); }

bool IsBF16Supported() { return GetSocVersion() >= SocVersion::Ascend910B1; }

bool IsSupportInfNan() {
  const SocVersion soc = GetSocVersion();
  return (soc >= SocVersion::Ascend910B1 && soc < SocVersion::Ascend310B1) || soc >= SocVersion::Ascend910_9391;
}

std::string GetCannVersion() {
  const char* version = nullptr;
  NPU_CHECK(nrtGetCannVersion(&version));
  return version;
}

bool IsGteCannVersion(const std::string& version) {
  auto wanted = ParseVersion(version);
  TORCH_CHECK_VALUE(wanted.has_value(), "'", version, "' is not a CANN version; expected ",
                    "major.minor.release (8.5.0) or major.minor.RCn (8.2.RC1)");
  auto current = ParseVersion(GetCannVersion());
  return current.has_value() && *current >= *wanted;
}

namespace option {

void SetOption(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  Options()[name] = value;
}

std::optional<std::string> GetOption(const std::string& name) {
  std::lock_guard<std::mutex> lock(OptionsMutex());
  auto it = Options().find(name);
  if (it == Options().end()) return std::nullopt;
  return it->second;
}

}  // namespace option
}  // namespace c10_npu

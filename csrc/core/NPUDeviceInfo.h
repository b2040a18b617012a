// NPUDeviceInfo.h - which chip and CANN version the device reports, and the named options
// (torch.npu.set_option, set_compile_mode, use_compatible_impl...) code may branch on.
#pragma once

#include <optional>
#include <string>

namespace c10_npu {

// torch_npu's SoC numbering (families in ranges, so code compares: soc >= Ascend910B1).
enum class SocVersion {
  UnsupportedSocVersion = -1,
  Ascend910PremiumA = 100,
  Ascend910ProA,
  Ascend910A,
  Ascend910ProB,
  Ascend910B,
  Ascend310P1 = 200,
  Ascend310P2,
  Ascend310P3,
  Ascend310P4,
  Ascend310P5,
  Ascend310P7,
  Ascend910B1 = 220,
  Ascend910B2,
  Ascend910B2C,
  Ascend910B3,
  Ascend910B4,
  Ascend910B4_1,
  Ascend310B1 = 240,
  Ascend310B2,
  Ascend310B3,
  Ascend310B4,
  Ascend910_9391 = 250,
  Ascend910_9392,
  Ascend910_9381,
  Ascend910_9382,
  Ascend910_9372,
  Ascend910_9362,
  Ascend910_9363,
  Ascend950 = 260
};

// The SoC name (NPU_SIM_SOC_VERSION, default Ascend910B1); throws naming the accepted values when
// the variable holds an unknown name.
std::string GetSocName();
SocVersion GetSocVersion();
bool IsBF16Supported();    // Ascend910B1 and later
bool IsSupportInfNan();    // Ascend910B1..B4, Ascend910_93xx, Ascend950

// The CANN version reported (NPU_SIM_CANN_VERSION); every module reports the same one.
std::string GetCannVersion();
// version >= the reported one, comparing "8.0.RC1" < "8.0.RC2" < "8.0.0" < "8.1.RC1" ...
bool IsGteCannVersion(const std::string& version);

namespace option {
// Process-wide named options (torch_npu's option names: "jitCompile",
// "TORCH_NPU_USE_COMPATIBLE_IMPL", "ACL_PRECISION_MODE", ...).
void SetOption(const std::string& name, const std::string& value);
std::optional<std::string> GetOption(const std::string& name);
}  // namespace option

}  // namespace c10_npu

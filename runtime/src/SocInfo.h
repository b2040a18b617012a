// SocInfo.h - the SoC and software version the software NPU reports (NPU_SIM_SOC_VERSION,
// NPU_SIM_CANN_VERSION), so that code choosing paths per chip behaves as on that chip.
#ifndef NPU_RUNTIME_SRC_SOCINFO_H_
#define NPU_RUNTIME_SRC_SOCINFO_H_

#include <string>

namespace npu::runtime {

inline constexpr const char* kDefaultSocName = "Ascend910B1";
inline constexpr const char* kDefaultCannVersion = "8.5.0";

struct SocSpec {
  const char* name;     // as aclrtGetSocName() spells it
  int cube_core_num;    // AI Core (cube) count
  int vector_core_num;  // vector core count (0 where the chip has none of its own)
};

// nullptr when `name` is not a known SoC.
const SocSpec* FindSoc(const std::string& name);

// "Ascend910A, Ascend910B1, ..." for error messages.
std::string KnownSocNames();

// True for "8.0.RC1", "8.0.0", "9.0.0", "8.1.RC1.alpha002": major.minor.(n|RCn|Tn)[.suffix].
bool IsCannVersion(const std::string& text);

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_SOCINFO_H_

// SocInfoTest.cpp - the SoC and CANN version the runtime reports (NPU_SIM_SOC_VERSION,
// NPU_SIM_CANN_VERSION) and the device properties derived from them.
#include <string>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

using SocInfoTest = RuntimeTest;

std::string SocName() {
  const char* name = nullptr;
  EXPECT_EQ(nrtGetSocName(&name), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return name ? name : "";
}

TEST_F(SocInfoTest, DefaultsToAscend910B1AndCann850) {
  EXPECT_EQ(SocName(), "Ascend910B1");
  const char* version = nullptr;
  NRT_EXPECT_OK(nrtGetCannVersion(&version));
  EXPECT_STREQ(version, "8.5.0");
  nrtDeviceProp prop;
  NRT_EXPECT_OK(nrtGetDeviceProperties(3, &prop));
  EXPECT_STREQ(prop.name, "Ascend910B1");
  EXPECT_EQ(prop.cube_core_num, 24);
  EXPECT_EQ(prop.vector_core_num, 48);
  EXPECT_EQ(prop.total_memory, size_t{16} << 30);
}

TEST_F(SocInfoTest, SocAndVersionComeFromEnvironment) {
  SetEnv("NPU_SIM_SOC_VERSION", "Ascend910B3");
  SetEnv("NPU_SIM_CANN_VERSION", "8.2.RC1");
  EXPECT_EQ(SocName(), "Ascend910B3");
  const char* version = nullptr;
  NRT_EXPECT_OK(nrtGetCannVersion(&version));
  EXPECT_STREQ(version, "8.2.RC1");
  SetEnv("NPU_SIM_SOC_VERSION", "Ascend950PR_9599");  // any Ascend950 part
  EXPECT_EQ(SocName(), "Ascend950PR_9599");
}

TEST_F(SocInfoTest, UnknownValuesFailWithTheAcceptedOnes) {
  SetEnv("NPU_SIM_SOC_VERSION", "Ascend999");
  const char* name = nullptr;
  EXPECT_EQ(nrtGetSocName(&name), NRT_ERROR_INVALID_VALUE);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("NPU_SIM_SOC_VERSION=\"Ascend999\""), std::string::npos) << message;
  EXPECT_NE(message.find("Ascend910B1"), std::string::npos) << message;
  nrtDeviceProp prop;
  EXPECT_EQ(nrtGetDeviceProperties(0, &prop), NRT_ERROR_INVALID_VALUE);
  int32_t count = 0;
  NRT_EXPECT_OK(nrtGetDeviceCount(&count));  // the devices still work

  for (const char* bad : {"8", "8.0", "eight.0.0", "8.0.X1", "8.0.RC"}) {
    SetEnv("NPU_SIM_CANN_VERSION", bad);
    const char* version = nullptr;
    EXPECT_EQ(nrtGetCannVersion(&version), NRT_ERROR_INVALID_VALUE) << bad;
  }
}

TEST_F(SocInfoTest, NullArgumentsAndBadDevicesAreRejected) {
  EXPECT_EQ(nrtGetSocName(nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtGetCannVersion(nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtGetDeviceProperties(0, nullptr), NRT_ERROR_INVALID_VALUE);
  nrtDeviceProp prop;
  EXPECT_EQ(nrtGetDeviceProperties(8, &prop), NRT_ERROR_INVALID_DEVICE);
}

}  // namespace
}  // namespace npu::runtime::testing

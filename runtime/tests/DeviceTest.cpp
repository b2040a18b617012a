// DeviceTest.cpp - device count from NPU_SIM_DEVICES, per-thread current device, lifecycle.
#include <chrono>
#include <string>
#include <thread>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

using DeviceTest = RuntimeTest;

int32_t DeviceCount() {
  int32_t count = -1;
  EXPECT_EQ(nrtGetDeviceCount(&count), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return count;
}

int32_t CurrentDevice() {
  int32_t device = -1;
  EXPECT_EQ(nrtGetDevice(&device), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return device;
}

TEST_F(DeviceTest, DefaultsToEightDevices) { EXPECT_EQ(DeviceCount(), 8); }

TEST_F(DeviceTest, CountComesFromEnvironment) {
  SetEnv("NPU_SIM_DEVICES", "3");
  EXPECT_EQ(DeviceCount(), 3);
  NRT_EXPECT_OK(nrtSetDevice(2));
  EXPECT_EQ(nrtSetDevice(3), NRT_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(nrtGetRecentErrMsg())
                .find("npu:3 does not exist: 3 devices are configured (NPU_SIM_DEVICES=3)"),
            std::string::npos)
      << nrtGetRecentErrMsg();
}

TEST_F(DeviceTest, InvalidCountFallsBackToEight) {
  for (const char* value : {"abc", "0", "-2", "4x", "", "100000"}) {
    SetEnv("NPU_SIM_DEVICES", value);
    EXPECT_EQ(DeviceCount(), 8) << "NPU_SIM_DEVICES=" << value;
  }
}

TEST_F(DeviceTest, VisibleDevicesSelectAndCount) {
  SetEnv("NPU_SIM_DEVICES", "4");
  const struct {
    const char* value;
    int count;
  } cases[] = {{"", 0},  {",", 0},     {" ,", 0},    {"0,", 1},   {",0", 0},    {"0, ", 1},  {"0, 1", 1},
               {"0,1", 2}, {"0,32,1", 1}, {"0,0", 0}, {"1,0", 0},  {"npu0", 0},  {"2,3", 2}, {"1,3,9", 2}};
  for (const auto& c : cases) {
    SetEnv("ASCEND_RT_VISIBLE_DEVICES", c.value);
    EXPECT_EQ(DeviceCount(), c.count) << "ASCEND_RT_VISIBLE_DEVICES=\"" << c.value << "\"";
  }
  SetEnv("ASCEND_RT_VISIBLE_DEVICES", "1,3");
  EXPECT_EQ(nrtSetDevice(2), NRT_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(nrtGetRecentErrMsg())
                .find("npu:2 does not exist: 2 devices are visible (ASCEND_RT_VISIBLE_DEVICES=\"1,3\" of "
                      "NPU_SIM_DEVICES=4"),
            std::string::npos)
      << nrtGetRecentErrMsg();
  NRT_EXPECT_OK(nrtSetDevice(1));
}

TEST_F(DeviceTest, InvalidDeviceIsRejectedWithContext) {
  NRT_ASSERT_OK(nrtSetDevice(1));
  EXPECT_EQ(nrtSetDevice(9), NRT_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(nrtGetRecentErrMsg())
                .find("npu:9 does not exist: 8 devices are configured (NPU_SIM_DEVICES=8)"),
            std::string::npos)
      << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtSetDevice(-1), NRT_ERROR_INVALID_DEVICE);
  EXPECT_EQ(CurrentDevice(), 1) << "a rejected nrtSetDevice must not change the current device";
}

TEST_F(DeviceTest, CurrentDeviceIsPerThread) {
  EXPECT_EQ(CurrentDevice(), 0);
  NRT_ASSERT_OK(nrtSetDevice(2));
  int32_t seen_by_other = -1;
  int32_t after_set = -1;
  std::thread other([&] {
    nrtGetDevice(&seen_by_other);
    nrtSetDevice(5);
    nrtGetDevice(&after_set);
  });
  other.join();
  EXPECT_EQ(seen_by_other, 0);
  EXPECT_EQ(after_set, 5);
  EXPECT_EQ(CurrentDevice(), 2);
}

TEST_F(DeviceTest, FinalizeResetsCurrentDeviceOfEveryThread) {
  NRT_ASSERT_OK(nrtSetDevice(5));
  SetEnv("NPU_SIM_DEVICES", "2");
  EXPECT_EQ(DeviceCount(), 2);
  EXPECT_EQ(CurrentDevice(), 0) << "device 5 no longer exists after re-initialisation";
}

TEST_F(DeviceTest, NullArgumentsAreInvalidValues) {
  EXPECT_EQ(nrtGetDeviceCount(nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtGetDevice(nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtStreamGetDevice(nullptr, nullptr), NRT_ERROR_INVALID_VALUE);
}

TEST_F(DeviceTest, InitAndFinalizeAreIdempotent) {
  NRT_EXPECT_OK(nrtInit());
  NRT_EXPECT_OK(nrtInit());
  NRT_EXPECT_OK(nrtFinalize());
  NRT_EXPECT_OK(nrtFinalize());
  EXPECT_EQ(DeviceCount(), 8) << "a call after nrtFinalize re-initialises";
}

TEST_F(DeviceTest, HostFunctionsRunOnTheirStreamsDevice) {
  NRT_ASSERT_OK(nrtSetDevice(3));
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtSetDevice(0));
  int32_t stream_device = -1;
  NRT_EXPECT_OK(nrtStreamGetDevice(stream, &stream_device));
  EXPECT_EQ(stream_device, 3);
  int32_t worker_device = -1;
  NRT_ASSERT_OK(LaunchCallable(stream, [&] { return nrtGetDevice(&worker_device); }));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(worker_device, 3);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(DeviceTest, FinalizeInsideAHostFunctionIsRejected) {
  nrtError_t result = NRT_SUCCESS;
  NRT_ASSERT_OK(LaunchCallable(nullptr, [&] {
    result = nrtFinalize();
    return 0;
  }));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(result, NRT_ERROR_INVALID_VALUE);
}

TEST_F(DeviceTest, CallsFromHostFunctionsDrainingDuringFinalizeAreRejected) {
  Gate gate;
  nrtError_t during_finalize = NRT_SUCCESS;
  NRT_ASSERT_OK(LaunchCallable(nullptr, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(nullptr, [&] {
    void* ptr = nullptr;
    during_finalize = nrtMalloc(&ptr, 64);
    return 0;
  }));
  // Opened late enough that nrtFinalize() is already draining the stream.
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate.Open();
  });
  NRT_EXPECT_OK(nrtFinalize());
  opener.join();
  EXPECT_EQ(during_finalize, NRT_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(DeviceCount(), 8) << "usable again once nrtFinalize() has returned";
}

}  // namespace
}  // namespace npu::runtime::testing

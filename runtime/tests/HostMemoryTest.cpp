// HostMemoryTest.cpp - device and pinned memory never promise more than the host can back.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

size_t AnonResident() {
  std::ifstream in("/proc/self/statm");
  size_t size = 0, resident = 0, shared = 0;
  in >> size >> resident >> shared;
  return (resident - shared) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t MemAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

class HostMemoryTest : public RuntimeTest {
 protected:
  // A host limit of what this process holds now plus `room`, with nothing kept in reserve.
  void LimitHostTo(size_t room) {
    SetEnv("NPU_SIM_HOST_MEMORY", std::to_string(AnonResident() + room).c_str());
    SetEnv("NPU_SIM_HOST_RESERVE", "0");
  }
};

TEST_F(HostMemoryTest, TouchedDeviceMemoryLeavesTheHostLessRoom) {
  LimitHostTo(112 * kMiB);
  void* a = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&a, 64 * kMiB));
  std::memset(a, 1, 64 * kMiB);  // resident now
  NRT_ASSERT_OK(nrtSetDevice(1));
  void* b = nullptr;
  ASSERT_EQ(nrtMalloc(&b, 64 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("npu:1 out of memory"), std::string::npos) << message;
  EXPECT_NE(message.find("host can back only"), std::string::npos) << message;
  EXPECT_NE(message.find("NPU_SIM_HOST_MEMORY limit"), std::string::npos) << message;
  EXPECT_NE(message.find("capacity free"), std::string::npos) << message;  // the device's own limit too
  NRT_ASSERT_OK(nrtSetDevice(0));
  NRT_ASSERT_OK(nrtFree(a));
  NRT_ASSERT_OK(nrtSetDevice(1));
  NRT_ASSERT_OK(nrtMalloc(&b, 64 * kMiB));  // the freed pages went back to the host
  NRT_EXPECT_OK(nrtFree(b));
}

TEST_F(HostMemoryTest, UntouchedDeviceMemoryCountsAsPromised) {
  LimitHostTo(112 * kMiB);
  void* a = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&a, 64 * kMiB));  // not touched: not resident, but promised
  void* b = nullptr;
  EXPECT_EQ(nrtMalloc(&b, 64 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  NRT_EXPECT_OK(nrtFree(a));
}

TEST_F(HostMemoryTest, PinnedAndMappedMemoryAreBoundedToo) {
  LimitHostTo(80 * kMiB);
  void* pinned = nullptr;
  ASSERT_EQ(nrtMallocHost(&pinned, 96 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("pinned host out of memory"), std::string::npos);
  NRT_ASSERT_OK(nrtMallocHost(&pinned, 32 * kMiB));
  size_t page = 0;
  NRT_ASSERT_OK(nrtMemGetAllocationGranularity(&page));
  void* range = nullptr;
  NRT_ASSERT_OK(nrtReserveMemAddress(&range, 256 * kMiB));
  EXPECT_EQ(nrtMapMem(range, 64 * kMiB), NRT_ERROR_OUT_OF_MEMORY);  // 32 + 64 > 80
  NRT_EXPECT_OK(nrtMapMem(range, 32 * kMiB));
  NRT_EXPECT_OK(nrtReleaseMemAddress(range));
  NRT_EXPECT_OK(nrtFreeHost(pinned));
}

TEST_F(HostMemoryTest, InfoReportsTheHostLimitAndWhatIsLeft) {
  LimitHostTo(200 * kMiB);
  size_t free_before = 0, total = 0;
  NRT_ASSERT_OK(nrtHostMemGetInfo(&free_before, &total));
  EXPECT_GT(total, 200 * kMiB);
  EXPECT_LE(free_before, 200 * kMiB);
  EXPECT_GT(free_before, 150 * kMiB);
  void* a = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&a, 64 * kMiB));
  size_t free_after = 0;
  NRT_ASSERT_OK(nrtHostMemGetInfo(&free_after, &total));
  EXPECT_LE(free_after + 60 * kMiB, free_before);
  // The device's free memory is bounded by what the host can back (its capacity is 16 GiB).
  size_t device_free = 0, capacity = 0;
  NRT_ASSERT_OK(nrtMemGetInfo(&device_free, &capacity));
  EXPECT_LE(device_free, free_after + 8 * kMiB);
  NRT_EXPECT_OK(nrtFree(a));
  EXPECT_EQ(nrtHostMemGetInfo(nullptr, &total), NRT_ERROR_INVALID_VALUE);
}

TEST_F(HostMemoryTest, TheRealHostBoundsALargeCapacity) {
  SetEnv("NPU_SIM_MEMORY", "64T");
  const size_t available = MemAvailable();
  ASSERT_GT(available, 0u);
  void* p = nullptr;
  // More than the host has: refused at once, before a page is touched.
  ASSERT_EQ(nrtMalloc(&p, available + 1024 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("host can back only"), std::string::npos) << message;
  NRT_ASSERT_OK(nrtMalloc(&p, 16 * kMiB));
  NRT_EXPECT_OK(nrtFree(p));
}

TEST_F(HostMemoryTest, BadLimitsAreIgnoredWithAWarning) {
  SetEnv("NPU_SIM_HOST_MEMORY", "lots");
  SetEnv("NPU_SIM_HOST_RESERVE", "-1");
  void* p = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&p, 16 * kMiB));
  NRT_EXPECT_OK(nrtFree(p));
}

}  // namespace
}  // namespace npu::runtime::testing

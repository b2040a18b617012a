// VirtualMemoryTest.cpp - reserved address ranges, page mapping, accounting and lookups inside them.
#include <cstring>
#include <string>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

using VirtualMemoryTest = RuntimeTest;

size_t UsedBytes() {
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(nrtMemGetInfo(&free_bytes, &total), NRT_SUCCESS);
  return total - free_bytes;
}

bool MessageHas(const char* text) {
  return std::string(nrtGetRecentErrMsg()).find(text) != std::string::npos;
}

TEST_F(VirtualMemoryTest, ReservingCostsNothingMappingIsAccounted) {
  SetEnv("NPU_SIM_MEMORY", "16M");
  size_t page = 0;
  NRT_ASSERT_OK(nrtMemGetAllocationGranularity(&page));
  ASSERT_GT(page, 0u);
  void* base = nullptr;
  NRT_ASSERT_OK(nrtReserveMemAddress(&base, 64 * kMiB));  // more than the capacity: only addresses
  EXPECT_EQ(UsedBytes(), 0u);
  char* p = static_cast<char*>(base);
  NRT_ASSERT_OK(nrtMapMem(p, 2 * kMiB));
  EXPECT_EQ(UsedBytes(), 2 * kMiB);
  EXPECT_EQ(p[2 * kMiB - 1], 0);  // fresh pages read as zeros
  std::memset(p, 7, 2 * kMiB);
  // Growing in place: the next pages continue the same run.
  NRT_ASSERT_OK(nrtMapMem(p + 2 * kMiB, 2 * kMiB));
  EXPECT_EQ(UsedBytes(), 4 * kMiB);
  std::memset(p + 2 * kMiB, 9, 2 * kMiB);
  EXPECT_EQ(p[0], 7);
  // Beyond the capacity fails like nrtMalloc, and nothing changes.
  EXPECT_EQ(nrtMapMem(p + 4 * kMiB, 16 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(MessageHas("out of memory")) << nrtGetRecentErrMsg();
  EXPECT_EQ(UsedBytes(), 4 * kMiB);
  NRT_EXPECT_OK(nrtUnmapMem(p, 2 * kMiB));
  EXPECT_EQ(UsedBytes(), 2 * kMiB);
  EXPECT_EQ(p[2 * kMiB], 9);
  NRT_EXPECT_OK(nrtReleaseMemAddress(base));
  EXPECT_EQ(UsedBytes(), 0u);
}

TEST_F(VirtualMemoryTest, MappedRunsAreDeviceMemoryForCopiesAndLookups) {
  void* base = nullptr;
  NRT_ASSERT_OK(nrtReserveMemAddress(&base, 8 * kMiB));
  char* p = static_cast<char*>(base);
  int32_t device = -1;
  EXPECT_EQ(nrtPointerGetDevice(p, &device), NRT_ERROR_INVALID_POINTER);  // reserved, not mapped
  NRT_ASSERT_OK(nrtMapMem(p, kMiB));
  NRT_ASSERT_OK(nrtMapMem(p + kMiB, kMiB));
  NRT_EXPECT_OK(nrtPointerGetDevice(p + kMiB + 5, &device));
  EXPECT_EQ(device, 0);
  void* run = nullptr;
  size_t run_size = 0;
  NRT_EXPECT_OK(nrtPointerGetRange(p + kMiB + 5, &device, &run, &run_size));
  EXPECT_EQ(run, base);  // the two mapped pieces are one run
  EXPECT_EQ(run_size, 2 * kMiB);
  // A copy may span both mapped pieces (one run) but not run into unmapped pages.
  std::string host(2 * kMiB, 'x');
  NRT_EXPECT_OK(nrtMemcpy(p, host.data(), 2 * kMiB, NRT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(p[2 * kMiB - 1], 'x');
  EXPECT_EQ(nrtMemcpy(p + kMiB, host.data(), 2 * kMiB, NRT_MEMCPY_HOST_TO_DEVICE),
            NRT_ERROR_INVALID_VALUE);
  EXPECT_TRUE(MessageHas("overruns")) << nrtGetRecentErrMsg();
  // Device memory is not host memory, mapped through a reservation or not.
  EXPECT_EQ(nrtMemcpy(host.data(), p, 16, NRT_MEMCPY_HOST_TO_HOST), NRT_ERROR_INVALID_MEMCPY_KIND);
  // An unmapped hole splits the run.
  NRT_ASSERT_OK(nrtUnmapMem(p + kMiB, 4096));
  EXPECT_EQ(nrtPointerGetDevice(p + kMiB, &device), NRT_ERROR_INVALID_POINTER);
  NRT_EXPECT_OK(nrtPointerGetDevice(p + kMiB + 4096, &device));
  NRT_EXPECT_OK(nrtReleaseMemAddress(base));
  EXPECT_EQ(nrtPointerGetDevice(p, &device), NRT_ERROR_INVALID_POINTER);
}

TEST_F(VirtualMemoryTest, MisuseIsAnErrorNotACrash) {
  void* base = nullptr;
  EXPECT_EQ(nrtReserveMemAddress(&base, 0), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtReserveMemAddress(&base, 100), NRT_ERROR_INVALID_VALUE);
  EXPECT_TRUE(MessageHas("granularity")) << nrtGetRecentErrMsg();
  NRT_ASSERT_OK(nrtReserveMemAddress(&base, 4 * kMiB));
  char* p = static_cast<char*>(base);
  EXPECT_EQ(nrtMapMem(p + 1, 4096), NRT_ERROR_INVALID_VALUE);            // unaligned
  EXPECT_EQ(nrtMapMem(p + 2 * kMiB, 4 * kMiB), NRT_ERROR_INVALID_VALUE);  // runs past the end
  NRT_ASSERT_OK(nrtMapMem(p, kMiB));
  EXPECT_EQ(nrtMapMem(p + 4096, 4096), NRT_ERROR_INVALID_VALUE);  // already mapped
  EXPECT_TRUE(MessageHas("already mapped")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtUnmapMem(p + kMiB, 4096), NRT_ERROR_INVALID_VALUE);  // not mapped
  EXPECT_EQ(nrtFree(p), NRT_ERROR_INVALID_POINTER);                 // not an nrtMalloc block
  EXPECT_TRUE(MessageHas("nrtReleaseMemAddress")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtReleaseMemAddress(p + 4096), NRT_ERROR_INVALID_POINTER);
  int local = 0;
  EXPECT_EQ(nrtMapMem(&local, 4096), NRT_ERROR_INVALID_VALUE);
  NRT_EXPECT_OK(nrtReleaseMemAddress(base));
  EXPECT_EQ(nrtReleaseMemAddress(base), NRT_ERROR_INVALID_POINTER);
}

TEST_F(VirtualMemoryTest, FinalizeReleasesReservations) {
  void* base = nullptr;
  NRT_ASSERT_OK(nrtReserveMemAddress(&base, 4 * kMiB));
  NRT_ASSERT_OK(nrtMapMem(base, kMiB));
  NRT_ASSERT_OK(nrtFinalize());
  EXPECT_EQ(UsedBytes(), 0u);
  int32_t device = -1;
  EXPECT_EQ(nrtPointerGetDevice(base, &device), NRT_ERROR_INVALID_POINTER);
}

}  // namespace
}  // namespace npu::runtime::testing

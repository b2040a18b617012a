// MemoryTest.cpp - bounded device memory, accounting, pointer lookup, pinned host memory.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

using MemoryTest = RuntimeTest;

size_t FreeBytes() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  EXPECT_EQ(nrtMemGetInfo(&free_bytes, &total_bytes), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return free_bytes;
}

size_t TotalBytes() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  EXPECT_EQ(nrtMemGetInfo(&free_bytes, &total_bytes), NRT_SUCCESS) << nrtGetRecentErrMsg();
  return total_bytes;
}

bool MessageHas(const char* text) {
  return std::string(nrtGetRecentErrMsg()).find(text) != std::string::npos;
}

TEST_F(MemoryTest, AllocationsAreUsableHostAddressableMemory) {
  void* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&ptr, 3 * kMiB + 5));
  ASSERT_NE(ptr, nullptr);
  std::memset(ptr, 0xab, 3 * kMiB + 5);
  EXPECT_EQ(static_cast<unsigned char*>(ptr)[3 * kMiB + 4], 0xab);
  NRT_EXPECT_OK(nrtFree(ptr));
}

TEST_F(MemoryTest, ZeroSizeAndNullAreFine) {
  void* ptr = reinterpret_cast<void*>(0x1);
  NRT_EXPECT_OK(nrtMalloc(&ptr, 0));
  EXPECT_EQ(ptr, nullptr);
  NRT_EXPECT_OK(nrtFree(nullptr));
  NRT_EXPECT_OK(nrtFreeHost(nullptr));
  EXPECT_EQ(nrtMalloc(nullptr, 16), NRT_ERROR_INVALID_VALUE);
}

TEST_F(MemoryTest, MemGetInfoAccountsWholePages) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(TotalBytes(), 64 * kMiB);
  EXPECT_EQ(FreeBytes(), 64 * kMiB);
  void* small = nullptr;
  void* large = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&small, 1));
  EXPECT_EQ(FreeBytes(), 64 * kMiB - page);
  NRT_ASSERT_OK(nrtMalloc(&large, 10 * kMiB));
  EXPECT_EQ(FreeBytes(), 54 * kMiB - page);
  NRT_EXPECT_OK(nrtFree(small));
  NRT_EXPECT_OK(nrtFree(large));
  EXPECT_EQ(FreeBytes(), 64 * kMiB);
}

TEST_F(MemoryTest, CapacityIsPerDevice) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  NRT_ASSERT_OK(nrtSetDevice(1));
  void* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&ptr, 48 * kMiB));
  EXPECT_EQ(FreeBytes(), 16 * kMiB);
  NRT_ASSERT_OK(nrtSetDevice(0));
  EXPECT_EQ(FreeBytes(), 64 * kMiB);
  void* other = nullptr;
  NRT_EXPECT_OK(nrtMalloc(&other, 48 * kMiB));
  NRT_EXPECT_OK(nrtFree(other));
  NRT_EXPECT_OK(nrtFree(ptr)) << "freeing does not depend on the current device";
}

TEST_F(MemoryTest, OutOfMemoryBeyondCapacityThenUsableAgain) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  void* first = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&first, 40 * kMiB));
  void* second = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(nrtMalloc(&second, 40 * kMiB), NRT_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(second, nullptr);
  EXPECT_TRUE(MessageHas("npu:0 out of memory")) << nrtGetRecentErrMsg();
  EXPECT_TRUE(MessageHas("(41943040 bytes)")) << "requested size: " << nrtGetRecentErrMsg();
  EXPECT_TRUE(MessageHas("(67108864 bytes) capacity")) << nrtGetRecentErrMsg();
  EXPECT_TRUE(MessageHas("NPU_SIM_MEMORY")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtMalloc(&second, SIZE_MAX), NRT_ERROR_OUT_OF_MEMORY);

  NRT_ASSERT_OK(nrtFree(first));
  NRT_EXPECT_OK(nrtMalloc(&second, 40 * kMiB));
  NRT_EXPECT_OK(nrtFree(second));
}

TEST_F(MemoryTest, CapacityAcceptsSizeSuffixes) {
  const std::pair<const char*, size_t> cases[] = {
      {"1G", size_t{1} << 30}, {"512k", 512 * 1024},    {"3MiB", 3 * kMiB},
      {"2048", 2048},          {"2T", size_t{2} << 40}, {"lots", size_t{16} << 30},
      {"0", size_t{16} << 30}, {"5Q", size_t{16} << 30}};
  for (const auto& [text, bytes] : cases) {
    SetEnv("NPU_SIM_MEMORY", text);
    EXPECT_EQ(TotalBytes(), bytes) << "NPU_SIM_MEMORY=" << text;
  }
}

TEST_F(MemoryTest, ConcurrentAllocationsNeverExceedCapacity) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  std::atomic<int> successes{0};
  std::vector<std::vector<void*>> held(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 16; ++i) {
        void* ptr = nullptr;
        if (nrtMalloc(&ptr, kMiB) == NRT_SUCCESS) {
          held[t].push_back(ptr);
          successes.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(successes.load(), 64);
  EXPECT_EQ(FreeBytes(), 0u);
  for (const auto& ptrs : held) {
    for (void* ptr : ptrs) NRT_EXPECT_OK(nrtFree(ptr));
  }
  EXPECT_EQ(FreeBytes(), 64 * kMiB);
}

TEST_F(MemoryTest, FreeOfUnknownOrFreedPointerIsAnErrorNotACrash) {
  int on_stack = 0;
  EXPECT_EQ(nrtFree(&on_stack), NRT_ERROR_INVALID_POINTER);
  EXPECT_TRUE(MessageHas("not a live device allocation")) << nrtGetRecentErrMsg();

  void* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&ptr, 4096));
  EXPECT_EQ(nrtFree(static_cast<char*>(ptr) + 16), NRT_ERROR_INVALID_POINTER);
  EXPECT_TRUE(MessageHas("is not its start")) << nrtGetRecentErrMsg();
  NRT_EXPECT_OK(nrtFree(ptr)) << "a rejected interior free must leave the allocation alive";
  EXPECT_EQ(nrtFree(ptr), NRT_ERROR_INVALID_POINTER);
  EXPECT_TRUE(MessageHas("already freed")) << nrtGetRecentErrMsg();
}

TEST_F(MemoryTest, PointerGetDeviceFindsInteriorPointers) {
  NRT_ASSERT_OK(nrtSetDevice(2));
  char* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(reinterpret_cast<void**>(&ptr), 1000));
  for (const char* p : {ptr, ptr + 100, ptr + 999}) {
    int32_t device = -1;
    NRT_EXPECT_OK(nrtPointerGetDevice(p, &device));
    EXPECT_EQ(device, 2);
  }
  int32_t device = -1;
  EXPECT_EQ(nrtPointerGetDevice(ptr + 1000, &device), NRT_ERROR_INVALID_POINTER);
  EXPECT_EQ(nrtPointerGetDevice(&device, &device), NRT_ERROR_INVALID_POINTER);
  EXPECT_EQ(nrtPointerGetDevice(ptr, nullptr), NRT_ERROR_INVALID_VALUE);
  NRT_EXPECT_OK(nrtFree(ptr));
  EXPECT_EQ(nrtPointerGetDevice(ptr, &device), NRT_ERROR_INVALID_POINTER);
}

TEST_F(MemoryTest, PointerGetRangeGivesTheWholeAllocation) {
  NRT_ASSERT_OK(nrtSetDevice(1));
  char* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(reinterpret_cast<void**>(&ptr), 1000));
  for (const char* p : {ptr, ptr + 500, ptr + 999}) {
    int32_t device = -1;
    void* base = nullptr;
    size_t size = 0;
    NRT_EXPECT_OK(nrtPointerGetRange(p, &device, &base, &size));
    EXPECT_EQ(device, 1);
    EXPECT_EQ(base, ptr);
    EXPECT_EQ(size, 1000u);
  }
  int32_t device = -1;
  void* base = nullptr;
  size_t size = 0;
  EXPECT_EQ(nrtPointerGetRange(ptr + 1000, &device, &base, &size), NRT_ERROR_INVALID_POINTER);
  EXPECT_EQ(nrtPointerGetRange(ptr, &device, nullptr, &size), NRT_ERROR_INVALID_VALUE);
  NRT_EXPECT_OK(nrtFree(ptr));
  EXPECT_EQ(nrtPointerGetRange(ptr, &device, &base, &size), NRT_ERROR_INVALID_POINTER);
}

TEST_F(MemoryTest, PinnedHostMemoryIsTrackedAndFreedSeparately) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  char* pinned = nullptr;
  NRT_ASSERT_OK(nrtMallocHost(reinterpret_cast<void**>(&pinned), 10000));
  std::memset(pinned, 1, 10000);
  EXPECT_EQ(nrtIsPinnedHostPtr(pinned), 1);
  EXPECT_EQ(nrtIsPinnedHostPtr(pinned + 9999), 1);
  EXPECT_EQ(nrtIsPinnedHostPtr(pinned + 10000), 0);
  int on_stack = 0;
  EXPECT_EQ(nrtIsPinnedHostPtr(&on_stack), 0);
  EXPECT_EQ(nrtIsPinnedHostPtr(nullptr), 0);
  EXPECT_EQ(FreeBytes(), 64 * kMiB) << "pinned host memory is not device memory";
  int32_t device = -1;
  EXPECT_EQ(nrtPointerGetDevice(pinned, &device), NRT_ERROR_INVALID_POINTER);

  EXPECT_EQ(nrtFree(pinned), NRT_ERROR_INVALID_POINTER);
  EXPECT_TRUE(MessageHas("nrtFreeHost")) << nrtGetRecentErrMsg();
  void* on_device = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&on_device, 64));
  EXPECT_EQ(nrtIsPinnedHostPtr(on_device), 0);
  EXPECT_EQ(nrtFreeHost(on_device), NRT_ERROR_INVALID_POINTER);
  EXPECT_TRUE(MessageHas("free it with nrtFree")) << nrtGetRecentErrMsg();
  NRT_EXPECT_OK(nrtFree(on_device));

  NRT_EXPECT_OK(nrtFreeHost(pinned));
  EXPECT_EQ(nrtIsPinnedHostPtr(pinned), 0);
  EXPECT_EQ(nrtFreeHost(pinned), NRT_ERROR_INVALID_POINTER);
  EXPECT_EQ(nrtFreeHost(&on_stack), NRT_ERROR_INVALID_POINTER);
}

TEST_F(MemoryTest, FinalizeReleasesEverything) {
  SetEnv("NPU_SIM_MEMORY", "64M");
  void* ptr = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&ptr, 60 * kMiB));
  NRT_ASSERT_OK(nrtFinalize());
  EXPECT_EQ(FreeBytes(), 64 * kMiB);
  EXPECT_EQ(nrtFree(ptr), NRT_ERROR_INVALID_POINTER) << "pointers do not survive nrtFinalize";
}

}  // namespace
}  // namespace npu::runtime::testing

// MemcpyTest.cpp - copies of every kind, kind and bounds checks, stream-ordered async copies.
#include <array>
#include <atomic>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

class MemcpyTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    NRT_ASSERT_OK(nrtMalloc(&device_a_, kBytes));
    NRT_ASSERT_OK(nrtMalloc(&device_b_, kBytes));
    host_.resize(kBytes);
    std::iota(host_.begin(), host_.end(), 0);
  }
  void TearDown() override {
    NRT_EXPECT_OK(nrtFree(device_a_));
    NRT_EXPECT_OK(nrtFree(device_b_));
    RuntimeTest::TearDown();
  }

  static constexpr size_t kBytes = 4096 + 100;
  void* device_a_ = nullptr;
  void* device_b_ = nullptr;
  std::vector<unsigned char> host_;
};

bool MessageHas(const char* text) {
  return std::string(nrtGetRecentErrMsg()).find(text) != std::string::npos;
}

TEST_F(MemcpyTest, RoundTripsThroughEveryKind) {
  std::vector<unsigned char> staged(kBytes);
  std::vector<unsigned char> back(kBytes);
  NRT_ASSERT_OK(nrtMemcpy(staged.data(), host_.data(), kBytes, NRT_MEMCPY_HOST_TO_HOST));
  NRT_ASSERT_OK(nrtMemcpy(device_a_, staged.data(), kBytes, NRT_MEMCPY_HOST_TO_DEVICE));
  NRT_ASSERT_OK(nrtMemcpy(device_b_, device_a_, kBytes, NRT_MEMCPY_DEVICE_TO_DEVICE));
  NRT_ASSERT_OK(nrtMemcpy(back.data(), device_b_, kBytes, NRT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(back, host_);
}

TEST_F(MemcpyTest, InteriorRangesAndOtherDevicesWork) {
  NRT_ASSERT_OK(nrtSetDevice(1));
  void* on_device_1 = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&on_device_1, 64));
  NRT_ASSERT_OK(nrtMemcpy(static_cast<char*>(device_a_) + kBytes - 64, host_.data(), 64,
                          NRT_MEMCPY_HOST_TO_DEVICE));
  NRT_ASSERT_OK(nrtMemcpy(on_device_1, static_cast<char*>(device_a_) + kBytes - 64, 64,
                          NRT_MEMCPY_DEVICE_TO_DEVICE));
  std::array<unsigned char, 64> back{};
  NRT_ASSERT_OK(nrtMemcpy(back.data(), on_device_1, 64, NRT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_TRUE(std::equal(back.begin(), back.end(), host_.begin()));
  NRT_EXPECT_OK(nrtFree(on_device_1));
}

TEST_F(MemcpyTest, ZeroBytesNeedNoPointers) {
  NRT_EXPECT_OK(nrtMemcpy(nullptr, nullptr, 0, NRT_MEMCPY_DEVICE_TO_DEVICE));
  NRT_EXPECT_OK(nrtMemcpyAsync(nullptr, nullptr, 0, NRT_MEMCPY_HOST_TO_DEVICE, nullptr));
  NRT_EXPECT_OK(nrtMemsetAsync(nullptr, 0, 0, nullptr));
  EXPECT_EQ(nrtMemcpy(nullptr, host_.data(), 8, NRT_MEMCPY_HOST_TO_HOST), NRT_ERROR_INVALID_VALUE);
}

TEST_F(MemcpyTest, HostPointerWhereKindSaysDeviceIsWrongKind) {
  std::vector<unsigned char> other(kBytes);
  EXPECT_EQ(nrtMemcpy(other.data(), host_.data(), 16, NRT_MEMCPY_HOST_TO_DEVICE),
            NRT_ERROR_INVALID_MEMCPY_KIND);
  EXPECT_TRUE(MessageHas("dst")) << nrtGetRecentErrMsg();
  EXPECT_TRUE(MessageHas("NRT_MEMCPY_HOST_TO_HOST")) << "suggests the fitting kind";
  EXPECT_EQ(nrtMemcpy(other.data(), host_.data(), 16, NRT_MEMCPY_DEVICE_TO_HOST),
            NRT_ERROR_INVALID_MEMCPY_KIND);
  EXPECT_EQ(nrtMemcpy(device_a_, host_.data(), 16, NRT_MEMCPY_DEVICE_TO_DEVICE),
            NRT_ERROR_INVALID_MEMCPY_KIND);
}

// C callers may pass any int (the fuzzer does): refused, and no undefined behaviour on the way (UBSan).
TEST_F(MemcpyTest, UnknownKindIsRefused) {
  for (int kind : {4, -1, 1 << 30}) {
    EXPECT_EQ(nrtMemcpy(host_.data(), host_.data() + 16, 16, static_cast<nrtMemcpyKind>(kind)),
              NRT_ERROR_INVALID_MEMCPY_KIND);
    EXPECT_TRUE(MessageHas("unknown memcpy kind")) << nrtGetRecentErrMsg();
    EXPECT_EQ(nrtMemcpyAsync(nullptr, reinterpret_cast<void*>(17), 1, static_cast<nrtMemcpyKind>(kind), nullptr),
              NRT_ERROR_INVALID_MEMCPY_KIND);
  }
}

TEST_F(MemcpyTest, DevicePointerWhereKindSaysHostIsWrongKind) {
  EXPECT_EQ(nrtMemcpy(host_.data(), device_a_, 16, NRT_MEMCPY_HOST_TO_HOST),
            NRT_ERROR_INVALID_MEMCPY_KIND);
  EXPECT_TRUE(MessageHas("is device memory on npu:0")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtMemcpy(device_a_, device_b_, 16, NRT_MEMCPY_HOST_TO_DEVICE),
            NRT_ERROR_INVALID_MEMCPY_KIND);
  EXPECT_TRUE(MessageHas("NRT_MEMCPY_DEVICE_TO_DEVICE")) << nrtGetRecentErrMsg();
}

TEST_F(MemcpyTest, RangesOverrunningTheAllocationAreInvalidValues) {
  std::vector<unsigned char> big(2 * kBytes);
  EXPECT_EQ(nrtMemcpy(device_a_, big.data(), kBytes + 1, NRT_MEMCPY_HOST_TO_DEVICE),
            NRT_ERROR_INVALID_VALUE);
  EXPECT_TRUE(MessageHas("overruns")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtMemcpy(big.data(), static_cast<char*>(device_a_) + 100, kBytes - 99,
                      NRT_MEMCPY_DEVICE_TO_HOST),
            NRT_ERROR_INVALID_VALUE);
  EXPECT_TRUE(MessageHas("by 1 bytes")) << nrtGetRecentErrMsg();
  EXPECT_EQ(nrtMemsetAsync(device_a_, 0, kBytes + 1, nullptr), NRT_ERROR_INVALID_VALUE);
}

TEST_F(MemcpyTest, PinnedHostMemoryCountsAsHost) {
  void* pinned = nullptr;
  NRT_ASSERT_OK(nrtMallocHost(&pinned, kBytes));
  NRT_EXPECT_OK(nrtMemcpyAsync(device_a_, pinned, kBytes, NRT_MEMCPY_HOST_TO_DEVICE, nullptr));
  EXPECT_EQ(nrtMemcpy(pinned, device_a_, 16, NRT_MEMCPY_DEVICE_TO_DEVICE),
            NRT_ERROR_INVALID_MEMCPY_KIND);
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  NRT_EXPECT_OK(nrtFreeHost(pinned));
}

TEST_F(MemcpyTest, RegisteredHostMemoryCountsAsPinnedUntilUnregistered) {
  std::vector<char> buffer(kBytes);
  char* base = buffer.data();
  EXPECT_EQ(nrtIsPinnedHostPtr(base), 0);
  NRT_ASSERT_OK(nrtHostRegister(base, kBytes / 2, NRT_HOST_REGISTER_PINNED | NRT_HOST_REGISTER_MAPPED));
  EXPECT_EQ(nrtIsPinnedHostPtr(base), 1);
  EXPECT_EQ(nrtIsPinnedHostPtr(base + kBytes / 2 - 1), 1);
  EXPECT_EQ(nrtIsPinnedHostPtr(base + kBytes / 2), 0);
  NRT_EXPECT_OK(nrtMemcpyAsync(device_a_, base, 64, NRT_MEMCPY_HOST_TO_DEVICE, nullptr));
  EXPECT_EQ(nrtHostRegister(base + 8, 16, NRT_HOST_REGISTER_PINNED), NRT_ERROR_INVALID_VALUE);  // overlaps
  EXPECT_EQ(nrtHostUnregister(base + 8), NRT_ERROR_INVALID_VALUE);  // not a base
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  NRT_EXPECT_OK(nrtHostUnregister(base));
  EXPECT_EQ(nrtIsPinnedHostPtr(base), 0);
  EXPECT_EQ(nrtHostRegister(nullptr, 16, NRT_HOST_REGISTER_PINNED), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtHostRegister(base, 0, NRT_HOST_REGISTER_PINNED), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtHostRegister(base, 16, 0x4), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtHostUnregister(base), NRT_ERROR_INVALID_VALUE);
}

TEST_F(MemcpyTest, FreedDeviceMemoryIsNoLongerDevice) {
  void* freed = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&freed, 1 << 20));
  NRT_ASSERT_OK(nrtFree(freed));
  EXPECT_EQ(nrtMemcpy(freed, host_.data(), 16, NRT_MEMCPY_HOST_TO_DEVICE),
            NRT_ERROR_INVALID_MEMCPY_KIND);
}

TEST_F(MemcpyTest, AsyncCopiesAreValidatedAtEnqueueAndRunInStreamOrder) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  EXPECT_EQ(nrtMemcpyAsync(host_.data(), device_a_, 16, NRT_MEMCPY_HOST_TO_DEVICE, stream),
            NRT_ERROR_INVALID_MEMCPY_KIND);

  Gate gate;
  std::vector<unsigned char> out(kBytes, 0xff);
  std::atomic<bool> device_matched_input{false};
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  NRT_ASSERT_OK(nrtMemcpyAsync(device_a_, host_.data(), kBytes, NRT_MEMCPY_HOST_TO_DEVICE, stream));
  NRT_ASSERT_OK(LaunchCallable(stream, [&] {
    device_matched_input = std::memcmp(device_a_, host_.data(), kBytes) == 0;
    return 0;
  }));
  NRT_ASSERT_OK(nrtMemsetAsync(device_a_, 7, 100, stream));
  NRT_ASSERT_OK(nrtMemcpyAsync(out.data(), device_a_, kBytes, NRT_MEMCPY_DEVICE_TO_HOST, stream));

  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_NOT_READY);
  EXPECT_EQ(out[0], 0xff) << "nothing may run before the gate opens";
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  EXPECT_TRUE(device_matched_input);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[99], 7);
  EXPECT_EQ(out[100], host_[100]);
  EXPECT_EQ(out[kBytes - 1], host_[kBytes - 1]);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(MemcpyTest, MemsetNeedsDeviceMemory) {
  EXPECT_EQ(nrtMemsetAsync(host_.data(), 0, 16, nullptr), NRT_ERROR_INVALID_POINTER);
  NRT_EXPECT_OK(nrtMemsetAsync(static_cast<char*>(device_a_) + 10, 0x5a, 20, nullptr));
  std::array<unsigned char, 40> back{};
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  NRT_ASSERT_OK(nrtMemcpy(back.data(), device_a_, back.size(), NRT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(back[9], 0);
  EXPECT_EQ(back[10], 0x5a);
  EXPECT_EQ(back[29], 0x5a);
  EXPECT_EQ(back[30], 0);
}

}  // namespace
}  // namespace npu::runtime::testing

namespace npu::runtime::testing {
namespace {

std::atomic<int> g_host_copies{0};
void CountingCopy(void* dst, const void* src, size_t count) {
  g_host_copies.fetch_add(1);
  std::memcpy(dst, src, count);
}

TEST_F(RuntimeTest, LargeSynchronousCopiesGoToTheHostCopy) {
  constexpr size_t kBytes = size_t{8} << 20;
  std::vector<char> host(kBytes, 7), back(kBytes, 0);
  void* dev = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&dev, 2 * kBytes));
  nrtSetHostCopy(&CountingCopy);
  g_host_copies = 0;
  NRT_ASSERT_OK(nrtMemcpy(dev, host.data(), kBytes, NRT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(g_host_copies.load(), 1);
  NRT_ASSERT_OK(nrtMemcpy(back.data(), dev, 1000, NRT_MEMCPY_DEVICE_TO_HOST));  // small: memmove
  EXPECT_EQ(g_host_copies.load(), 1);
  NRT_ASSERT_OK(nrtMemcpy(back.data(), dev, size_t{1} << 20, NRT_MEMCPY_DEVICE_TO_HOST));  // under 4 MiB: memmove
  EXPECT_EQ(g_host_copies.load(), 1);
  // Overlapping device-to-device ranges within one allocation: memmove, never the parallel copy.
  NRT_ASSERT_OK(nrtMemcpy(static_cast<char*>(dev) + 4096, dev, kBytes, NRT_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_EQ(g_host_copies.load(), 1);
  // A stream worker's copy: memmove too (it overlaps with the host's own work).
  NRT_ASSERT_OK(nrtMemcpyAsync(back.data(), dev, kBytes, NRT_MEMCPY_DEVICE_TO_HOST, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(g_host_copies.load(), 1);
  EXPECT_EQ(back[5000], 7);
  nrtSetHostCopy(nullptr);
  NRT_EXPECT_OK(nrtFree(dev));
}

}  // namespace
}  // namespace npu::runtime::testing

// KernelLaunchTest.cpp - direct kernel launch: block split with ragged tails, parallel blocks on the
// simulated cores, stream order, failing blocks reported at the next sync, argument lifetime, limits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "RuntimeTest.h"
#include "npu/kernel_launch.h"

// z = x + y over `total` floats; block i takes ceil(total / blocks) elements, the last one the rest.
extern "C" __global__ __aicore__ void add_kernel(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t total) {
  const int64_t per_block = (total + GetBlockNum() - 1) / GetBlockNum();
  const int64_t begin = GetBlockIdx() * per_block;
  const int64_t end = std::min<int64_t>(begin + per_block, total);
  auto* xs = reinterpret_cast<const float*>(x);
  auto* ys = reinterpret_cast<const float*>(y);
  auto* zs = reinterpret_cast<float*>(z);
  for (int64_t i = begin; i < end; ++i) zs[i] = xs[i] + ys[i];
}

namespace npu::runtime::testing {
namespace {

using KernelLaunchTest = RuntimeTest;

// Fails in the blocks whose index is in `failing` (a bit mask).
void checked_kernel(uint32_t failing) {
  ascendc_assert(((failing >> GetBlockIdx()) & 1u) == 0, "block %ld refuses", static_cast<long>(GetBlockIdx()));
}

struct DeviceBuffers {
  explicit DeviceBuffers(size_t count) : bytes(count * sizeof(float)) {
    for (void** p : {&x, &y, &z}) EXPECT_EQ(nrtMalloc(p, bytes), NRT_SUCCESS);
  }
  ~DeviceBuffers() {
    for (void* p : {x, y, z}) nrtFree(p);
  }
  size_t bytes;
  void* x = nullptr;
  void* y = nullptr;
  void* z = nullptr;
};

TEST_F(KernelLaunchTest, EveryBlockDimCoversTheRaggedTail) {
  constexpr uint32_t kTotal = 1000;  // not a multiple of most block counts below
  std::vector<float> x(kTotal), y(kTotal), z(kTotal);
  for (uint32_t i = 0; i < kTotal; ++i) x[i] = static_cast<float>(i), y[i] = 0.5f * static_cast<float>(i);
  DeviceBuffers dev(kTotal);
  NRT_ASSERT_OK(nrtMemcpy(dev.x, x.data(), dev.bytes, NRT_MEMCPY_HOST_TO_DEVICE));
  NRT_ASSERT_OK(nrtMemcpy(dev.y, y.data(), dev.bytes, NRT_MEMCPY_HOST_TO_DEVICE));
  for (uint32_t blocks : {1u, 2u, 3u, 7u, 8u, 9u, 31u, 64u, 999u, 1000u}) {
    NRT_ASSERT_OK(nrtMemsetAsync(dev.z, 0, dev.bytes, nullptr));
    NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(add_kernel)(blocks, nullptr, static_cast<uint8_t*>(dev.x),
                                                  static_cast<uint8_t*>(dev.y), static_cast<uint8_t*>(dev.z),
                                                  kTotal));
    NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
    NRT_ASSERT_OK(nrtMemcpy(z.data(), dev.z, dev.bytes, NRT_MEMCPY_DEVICE_TO_HOST));
    for (uint32_t i = 0; i < kTotal; ++i) ASSERT_EQ(z[i], 1.5f * static_cast<float>(i)) << blocks << " blocks, i=" << i;
  }
}

// Each block waits until all `expected` blocks are inside the kernel at once: it finishes only if
// that many blocks really run in parallel (a timeout turns a serial run into a failure, not a hang).
struct Rendezvous {
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int peak = 0;
};
Rendezvous* g_rendezvous = nullptr;

void rendezvous_kernel(int expected) {
  std::unique_lock<std::mutex> lock(g_rendezvous->mu);
  ++g_rendezvous->arrived;
  g_rendezvous->peak = std::max(g_rendezvous->peak, g_rendezvous->arrived);
  g_rendezvous->cv.notify_all();
  const bool all = g_rendezvous->cv.wait_for(lock, std::chrono::seconds(10),
                                             [&] { return g_rendezvous->arrived >= expected; });
  ascendc_assert(all, "only %d of %d blocks ran at the same time", g_rendezvous->arrived, expected);
}

TEST_F(KernelLaunchTest, BlocksRunInParallelOnTheConfiguredCores) {
  SetEnv("NPU_SIM_CORES", "4");
  int32_t cores = 0;
  NRT_ASSERT_OK(nrtGetDeviceCoreCount(&cores));
  EXPECT_EQ(cores, 4);
  Rendezvous rendezvous;
  g_rendezvous = &rendezvous;
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(rendezvous_kernel)(4, nullptr, 4));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(rendezvous.peak, 4);
  g_rendezvous = nullptr;
}

std::atomic<int> g_running{0};
std::atomic<int> g_peak{0};

void counting_kernel() {
  const int now = ++g_running;
  int peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  --g_running;
}

TEST_F(KernelLaunchTest, NoMoreBlocksAtOnceThanCores) {
  SetEnv("NPU_SIM_CORES", "2");
  g_peak = 0;
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(counting_kernel)(16, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_GE(g_peak.load(), 1);
  EXPECT_LE(g_peak.load(), 2);
}

TEST_F(KernelLaunchTest, InvalidCoreCountFallsBackToTheDefault) {
  SetEnv("NPU_SIM_CORES", "many");
  int32_t cores = 0;
  NRT_ASSERT_OK(nrtGetDeviceCoreCount(&cores));
  EXPECT_EQ(cores, 8);
}

TEST_F(KernelLaunchTest, KernelsKeepStreamOrder) {
  constexpr uint32_t kTotal = 4096;
  std::vector<float> ones(kTotal, 1.0f), out(kTotal, 0.0f);
  DeviceBuffers dev(kTotal);
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));  // everything below waits behind this
  NRT_ASSERT_OK(nrtMemcpyAsync(dev.x, ones.data(), dev.bytes, NRT_MEMCPY_HOST_TO_DEVICE, stream));
  NRT_ASSERT_OK(nrtMemcpyAsync(dev.y, ones.data(), dev.bytes, NRT_MEMCPY_HOST_TO_DEVICE, stream));
  auto* x = static_cast<uint8_t*>(dev.x);
  auto* y = static_cast<uint8_t*>(dev.y);
  auto* z = static_cast<uint8_t*>(dev.z);
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(add_kernel)(8, stream, x, y, z, kTotal));  // z = 2
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(add_kernel)(3, stream, z, z, x, kTotal));  // x = 4
  NRT_ASSERT_OK(nrtMemcpyAsync(out.data(), dev.x, dev.bytes, NRT_MEMCPY_DEVICE_TO_HOST, stream));
  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_NOT_READY);
  EXPECT_EQ(out[0], 0.0f);  // nothing ran yet
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  for (uint32_t i = 0; i < kTotal; ++i) ASSERT_EQ(out[i], 4.0f) << i;
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(KernelLaunchTest, FailingBlockSurfacesAtTheNextSyncNamingTheKernel) {
  nrtSetKernelLaunchTag("(launched from model.py:7)");
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(checked_kernel)(8, nullptr, (1u << 5) | (1u << 6)));
  nrtSetKernelLaunchTag(nullptr);
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_EQ(message.rfind("kernel checked_kernel failed in block 5 of 8: ascendc_assert(", 0), 0u) << message;
  EXPECT_NE(message.find("KernelLaunchTest.cpp:"), std::string::npos) << message;
  EXPECT_NE(message.find(": block 5 refuses (and 1 more failed blocks) (launched from model.py:7)"),
            std::string::npos)
      << message;
  // Reported once; the stream stays usable.
  NRT_EXPECT_OK(ACLRT_LAUNCH_KERNEL(checked_kernel)(8, nullptr, 0u));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
}

void throwing_kernel() {
  if (GetBlockIdx() == 1) throw std::runtime_error("bad tiling");
}

TEST_F(KernelLaunchTest, AnExceptionFailsTheBlockToo) {
  NRT_ASSERT_OK(ACLRT_LAUNCH_KERNEL(throwing_kernel)(2, nullptr));
  EXPECT_EQ(nrtDeviceSynchronize(), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "kernel throwing_kernel failed in block 1 of 2: bad tiling");
}

int g_destroyed = 0;
int NoopBlock(void*) { return 0; }
int FailingBlock(void*) { return 7; }
void CountDestroy(void*) { ++g_destroyed; }

TEST_F(KernelLaunchTest, ArgumentsAreReleasedExactlyOnce) {
  g_destroyed = 0;
  NRT_ASSERT_OK(nrtLaunchKernel("noop", 4, nullptr, &NoopBlock, nullptr, &CountDestroy));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(g_destroyed, 1);
  // Refused launches release them before returning.
  EXPECT_EQ(nrtLaunchKernel("noop", 0, nullptr, &NoopBlock, nullptr, &CountDestroy), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "kernel noop: blockDim 0 is outside [1, 65535]");
  EXPECT_EQ(nrtLaunchKernel("noop", 65536, nullptr, &NoopBlock, nullptr, &CountDestroy), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtLaunchKernel("noop", 1, nullptr, nullptr, nullptr, &CountDestroy), NRT_ERROR_INVALID_VALUE);
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtStreamDestroy(stream));
  EXPECT_EQ(nrtLaunchKernel("noop", 1, stream, &NoopBlock, nullptr, &CountDestroy), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(g_destroyed, 5);
}

TEST_F(KernelLaunchTest, ABlockWithoutAMessageReportsItsStatus) {
  NRT_ASSERT_OK(nrtLaunchKernel("raw", 1, nullptr, &FailingBlock, nullptr, nullptr));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(std::string(nrtGetRecentErrMsg()), "kernel raw failed in block 0 of 1: the block returned 7");
}

TEST_F(KernelLaunchTest, BlockIndexOutsideAKernel) {
  EXPECT_EQ(GetBlockIdx(), 0);
  EXPECT_EQ(GetBlockNum(), 1);
}

}  // namespace
}  // namespace npu::runtime::testing

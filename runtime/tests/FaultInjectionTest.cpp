// FaultInjectionTest.cpp - NPU_SIM_FAULT faults, the NPU_SIM_TASK_TIMEOUT watchdog, and the runtime
// in a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "RuntimeTest.h"
#include "npu/kernel_launch.h"

namespace npu::runtime::testing {
namespace {

using Clock = std::chrono::steady_clock;

class FaultInjectionTest : public RuntimeTest {};

int Succeed(void*) { return 0; }

int Sleep50ms(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return 0;
}

nrtError_t LaunchNamed(nrtStream_t stream, const char* name, nrtHostFunc fn = &Succeed) {
  return nrtLaunchHostFuncNamed(stream, fn, nullptr, name, "train.py:42");
}

TEST_F(FaultInjectionTest, TaskFailFiresOnTheMatchingOpAfterNThenRecovers) {
  SetEnv("NPU_SIM_FAULT", "task_fail:op=mm:after=1:count=2");
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  // Other ops do not count; the first mm passes.
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::add.Tensor"));
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  ASSERT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_TASK_FAILED);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("aten::mm failed on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("task_fail:op=mm:after=1:count=2"), std::string::npos) << message;
  EXPECT_NE(message.find("launched from train.py:42"), std::string::npos) << message;
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  EXPECT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_TASK_FAILED);
  // count=2 is used up: the stream works again.
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(FaultInjectionTest, OomFailsTheChosenAllocationOnly) {
  SetEnv("NPU_SIM_FAULT", "oom:after=1");
  void* first = nullptr;
  void* second = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&first, 4096));
  ASSERT_EQ(nrtMalloc(&second, 4096), NRT_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("npu:0 cannot allocate 4.00 KiB: injected fault `oom:after=1`"),
            std::string::npos)
      << nrtGetRecentErrMsg();
  NRT_ASSERT_OK(nrtMalloc(&second, 4096));
  NRT_EXPECT_OK(nrtFree(first));
  NRT_EXPECT_OK(nrtFree(second));
}

TEST_F(FaultInjectionTest, MemcpyFailFailsSyncCopiesAtOnceAndAsyncCopiesAtTheSync) {
  SetEnv("NPU_SIM_FAULT", "memcpy_fail:count=2");
  void* device = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&device, 64));
  char host[64] = {1};
  ASSERT_EQ(nrtMemcpy(device, host, sizeof(host), NRT_MEMCPY_HOST_TO_DEVICE), NRT_ERROR_TASK_FAILED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("memcpy (NRT_MEMCPY_HOST_TO_DEVICE, 64 bytes) failed on npu:0"),
            std::string::npos)
      << nrtGetRecentErrMsg();
  NRT_ASSERT_OK(nrtMemcpyAsync(host, device, sizeof(host), NRT_MEMCPY_DEVICE_TO_HOST, nullptr));
  ASSERT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("injected fault `memcpy_fail:count=2`"), std::string::npos);
  EXPECT_EQ(host[0], 1) << "the failed copy must not have run";
  NRT_EXPECT_OK(nrtMemcpy(device, host, sizeof(host), NRT_MEMCPY_HOST_TO_DEVICE));
  NRT_EXPECT_OK(nrtFree(device));
}

TEST_F(FaultInjectionTest, DeviceLostIsStickyOnThatDeviceOnly) {
  SetEnv("NPU_SIM_FAULT", "device_lost:device=1:after=1");
  NRT_ASSERT_OK(nrtSetDevice(1));
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::add.Tensor"));
  NRT_ASSERT_OK(nrtDeviceSynchronize());
  nrtDeviceStatus status = NRT_DEVICE_LOST;
  NRT_ASSERT_OK(nrtGetDeviceStatus(1, &status));
  EXPECT_EQ(status, NRT_DEVICE_OK);
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::mul.Tensor"));
  ASSERT_EQ(nrtDeviceSynchronize(), NRT_ERROR_TASK_FAILED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("aten::mul.Tensor failed on npu:1 stream #"), std::string::npos)
      << nrtGetRecentErrMsg();
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("npu:1 is lost"), std::string::npos);
  NRT_ASSERT_OK(nrtGetDeviceStatus(1, &status));
  EXPECT_EQ(status, NRT_DEVICE_LOST);
  // Every later call on device 1 fails...
  EXPECT_EQ(nrtDeviceSynchronize(), NRT_ERROR_DEVICE_LOST);
  EXPECT_EQ(LaunchNamed(nullptr, "aten::add.Tensor"), NRT_ERROR_DEVICE_LOST);
  void* ptr = nullptr;
  EXPECT_EQ(nrtMalloc(&ptr, 64), NRT_ERROR_DEVICE_LOST);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("npu:1 is lost"), std::string::npos);
  // ... while device 0 keeps working.
  NRT_ASSERT_OK(nrtSetDevice(0));
  NRT_ASSERT_OK(nrtGetDeviceStatus(0, &status));
  EXPECT_EQ(status, NRT_DEVICE_OK);
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::add.Tensor"));
  NRT_EXPECT_OK(nrtDeviceSynchronize());
  NRT_ASSERT_OK(nrtMalloc(&ptr, 64));
  NRT_EXPECT_OK(nrtFree(ptr));
}

TEST_F(FaultInjectionTest, WatchdogTurnsAHangIntoAnErrorNamingTheOpAndItsSite) {
  SetEnv("NPU_SIM_FAULT", "hang:op=all_reduce");
  SetEnv("NPU_SIM_TASK_TIMEOUT", "0.2");
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(LaunchNamed(stream, "hccl all_reduce"));
  const auto start = Clock::now();
  ASSERT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_TASK_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(150));
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("hccl all_reduce on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("task timeout 0.2 s"), std::string::npos) << message;
  EXPECT_NE(message.find("launched from train.py:42"), std::string::npos) << message;
  // Other streams are unaffected, and destroying the stuck stream ends the injected hang.
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::add.Tensor"));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(FaultInjectionTest, WatchdogReportsASlowTaskAndTheStreamRecoversWhenItEnds) {
  SetEnv("NPU_SIM_TASK_TIMEOUT", "0.01");
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::mm", &Sleep50ms));
  ASSERT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_TIMEOUT);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
}

TEST_F(FaultInjectionTest, WatchdogCoversEventSynchronizeNamingTheStuckOp) {
  SetEnv("NPU_SIM_FAULT", "hang:op=mm");
  SetEnv("NPU_SIM_TASK_TIMEOUT", "0.2");
  nrtStream_t stream = nullptr;
  nrtEvent_t event = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtEventCreate(&event));
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  NRT_ASSERT_OK(nrtEventRecord(event, stream));
  const auto start = Clock::now();
  ASSERT_EQ(nrtEventSynchronize(event), NRT_ERROR_TASK_TIMEOUT);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(150));
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("aten::mm on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("longer than the task timeout 0.2 s"), std::string::npos) << message;
  EXPECT_NE(message.find("launched from train.py:42"), std::string::npos) << message;
  EXPECT_EQ(nrtEventQuery(event), NRT_ERROR_NOT_READY);
  NRT_EXPECT_OK(nrtEventDestroy(event));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

// A stream waiting for an event of a stuck stream is stuck too: its sync names the op it waits for.
TEST_F(FaultInjectionTest, WatchdogFollowsAnEventWaitToTheStuckOp) {
  SetEnv("NPU_SIM_FAULT", "hang:op=mm");
  SetEnv("NPU_SIM_TASK_TIMEOUT", "0.2");
  nrtStream_t stuck = nullptr;
  nrtStream_t waiter = nullptr;
  nrtEvent_t event = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stuck));
  NRT_ASSERT_OK(nrtStreamCreate(&waiter));
  NRT_ASSERT_OK(nrtEventCreate(&event));
  NRT_ASSERT_OK(LaunchNamed(stuck, "aten::mm"));
  NRT_ASSERT_OK(nrtEventRecord(event, stuck));
  NRT_ASSERT_OK(nrtStreamWaitEvent(waiter, event));
  NRT_ASSERT_OK(LaunchNamed(waiter, "aten::add.Tensor"));
  ASSERT_EQ(nrtStreamSynchronize(waiter), NRT_ERROR_TASK_TIMEOUT);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("an event wait on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("it waits for an event recorded on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find(", where aten::mm has been running for "), std::string::npos) << message;
  EXPECT_NE(message.find("launched from train.py:42"), std::string::npos) << message;
  // The device-wide sync reports the stuck stream as well.
  EXPECT_EQ(nrtDeviceSynchronize(), NRT_ERROR_TASK_TIMEOUT);
  NRT_EXPECT_OK(nrtEventDestroy(event));
  NRT_EXPECT_OK(nrtStreamDestroy(stuck));  // ends the hang, and with it the wait
  // The wait ends a moment later; a sync before that would still find it past the timeout.
  for (int i = 0; i < 500 && nrtStreamQuery(waiter) == NRT_ERROR_NOT_READY; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  NRT_EXPECT_OK(nrtStreamSynchronize(waiter));
  NRT_EXPECT_OK(nrtStreamDestroy(waiter));
}

int KernelBlock(void*) { return 0; }

// Launched kernels are named tasks: NPU_SIM_FAULT selects them by kernel name, and failures and
// the watchdog name them with the launch tag.
TEST_F(FaultInjectionTest, LaunchedKernelsAreNamedForFaultsAndTheWatchdog) {
  SetEnv("NPU_SIM_FAULT", "task_fail:op=add_custom;hang:op=stuck_kernel");
  SetEnv("NPU_SIM_TASK_TIMEOUT", "0.2");
  nrtSetKernelLaunchTag("(launched from model.py:7)");
  NRT_ASSERT_OK(nrtLaunchKernel("other_kernel", 2, nullptr, &KernelBlock, nullptr, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  NRT_ASSERT_OK(nrtLaunchKernel("add_custom", 2, nullptr, &KernelBlock, nullptr, nullptr));
  ASSERT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("kernel add_custom failed on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("task_fail:op=add_custom"), std::string::npos) << message;
  EXPECT_NE(message.find("(launched from model.py:7)"), std::string::npos) << message;
  NRT_ASSERT_OK(nrtLaunchKernel("add_custom", 2, nullptr, &KernelBlock, nullptr, nullptr));  // count=1: used
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));

  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtLaunchKernel("stuck_kernel", 1, stream, &KernelBlock, nullptr, nullptr));
  nrtSetKernelLaunchTag(nullptr);
  ASSERT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_TASK_TIMEOUT);
  message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("kernel stuck_kernel on npu:0 stream #"), std::string::npos) << message;
  EXPECT_NE(message.find("(launched from model.py:7)"), std::string::npos) << message;
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(FaultInjectionTest, SlowMultipliesTaskTime) {
  SetEnv("NPU_SIM_FAULT", "slow:factor=4:op=mm");
  const auto start = Clock::now();
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aten::mm", &Sleep50ms));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(190));
}

TEST_F(FaultInjectionTest, MalformedSpecsStopTheRuntime) {
  for (const char* spec : {"explode", "task_fail:bogus=1", "slow", "slow:factor=0.5", "oom:op=mm", "task_fail:count=0",
                           "hang:op=aclnnMul:count=1", "device_lost:count=2", "slow:factor=2:after=3"}) {
    SetEnv("NPU_SIM_FAULT", spec);
    int32_t count = 0;
    EXPECT_EQ(nrtGetDeviceCount(&count), NRT_ERROR_INVALID_VALUE) << spec;
    const std::string message = nrtGetRecentErrMsg();
    EXPECT_NE(message.find(std::string("NPU_SIM_FAULT=\"") + spec + "\" is malformed"), std::string::npos) << message;
  }
  SetEnv("NPU_SIM_FAULT", "hang:op=aclnnMul:count=1");
  int32_t count = 0;
  EXPECT_EQ(nrtGetDeviceCount(&count), NRT_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("hang takes no `count`"), std::string::npos) << nrtGetRecentErrMsg();
  SetEnv("NPU_SIM_FAULT", nullptr);
  NRT_EXPECT_OK(nrtGetDeviceCount(&count));  // starts once the spec is gone
}

TEST_F(FaultInjectionTest, AnAtenOpNameMatchesTheDeviceOpsItLaunches) {
  SetEnv("NPU_SIM_FAULT", "task_fail:op=mul");
  ASSERT_EQ(nrtFaultsMatchLaunchOrigins(), 1);
  // x * 2 launches aclnnMuls from inside aten::mul.Tensor: op=mul matches through the origin.
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aclnnMuls"));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));  // launched outside aten::mul: no match
  nrtPushLaunchOrigin("aten::mul.Tensor");
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aclnnMuls"));
  nrtPopLaunchOrigin();
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("aclnnMuls failed"), std::string::npos) << nrtGetRecentErrMsg();
  char report[256];
  NRT_ASSERT_OK(nrtGetUnmatchedFaults(report, sizeof(report)));
  EXPECT_STREQ(report, "");
}

TEST_F(FaultInjectionTest, AFaultWhoseOpMatchesNothingIsReported) {
  SetEnv("NPU_SIM_FAULT", "task_fail:op=mul;slow:factor=2:op=aclnnMm");
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aclnnMuls"));
  NRT_ASSERT_OK(LaunchNamed(nullptr, "aclnnMm"));
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
  char report[1024];
  NRT_ASSERT_OK(nrtGetUnmatchedFaults(report, sizeof(report)));
  const std::string text = report;
  EXPECT_NE(text.find("`task_fail:op=mul` matched no task"), std::string::npos) << text;
  EXPECT_EQ(text.find("slow"), std::string::npos) << text;  // that one matched
  EXPECT_NE(text.find("the tasks that ran were: aclnnMm, aclnnMuls"), std::string::npos) << text;
  EXPECT_EQ(nrtGetUnmatchedFaults(nullptr, 0), NRT_ERROR_INVALID_VALUE);
}

// A forked child starts a fresh runtime: the parent's stream workers do not exist there.
TEST_F(FaultInjectionTest, ForkedChildReinitialisesTheRuntime) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(LaunchNamed(stream, "aten::mm"));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int code = 0;
    void* ptr = nullptr;
    nrtStream_t child_stream = nullptr;
    char host[16] = {7};
    if (nrtStreamSynchronize(stream) != NRT_ERROR_INVALID_HANDLE) code |= 1;  // the parent's handle
    if (nrtMalloc(&ptr, 16) != NRT_SUCCESS) code |= 2;
    if (nrtStreamCreate(&child_stream) != NRT_SUCCESS) code |= 4;
    if (nrtMemcpyAsync(ptr, host, 16, NRT_MEMCPY_HOST_TO_DEVICE, child_stream) != NRT_SUCCESS) code |= 8;
    if (LaunchNamed(child_stream, "aten::mm") != NRT_SUCCESS) code |= 16;
    if (nrtStreamSynchronize(child_stream) != NRT_SUCCESS) code |= 32;
    if (static_cast<char*>(ptr)[0] != 7) code |= 64;
    if (nrtDeviceSynchronize() != NRT_SUCCESS) code |= 128;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

}  // namespace
}  // namespace npu::runtime::testing

// GraphTest.cpp - stream capture and graph replay: recording, replays, owned data, forbidden calls
// per capture mode, fork and join through events, copies, kernels, failures and the replay seed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "RuntimeTest.h"
#include "npu/graph.h"
#include "npu/kernel_launch.h"

namespace npu::runtime::testing {
namespace {

// A callable launched as an owned host function: it runs once per launch or replay and is freed
// exactly once (counted in *released).
struct Counted {
  std::function<int()> fn;
  std::atomic<int>* released;
};

nrtError_t LaunchOwned(nrtStream_t stream, std::function<int()> fn, std::atomic<int>* released,
                       const char* name = "test_op") {
  auto* data = new Counted{std::move(fn), released};
  return nrtLaunchHostFuncOwned(
      stream, [](void* d) { return static_cast<Counted*>(d)->fn(); },
      data,
      [](void* d) {
        auto* counted = static_cast<Counted*>(d);
        if (counted->released) counted->released->fetch_add(1);
        delete counted;
      },
      name, nullptr, 0);
}

class GraphTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    NRT_ASSERT_OK(nrtStreamCreate(&stream_));
    NRT_ASSERT_OK(nrtStreamCreate(&side_));
  }
  void TearDown() override {
    NRT_EXPECT_OK(nrtStreamDestroy(stream_));
    NRT_EXPECT_OK(nrtStreamDestroy(side_));
    RuntimeTest::TearDown();
  }

  // Captures `body` on stream_ and returns the graph (asserting success).
  template <typename Body>
  nrtGraph_t Capture(Body body, nrtCaptureMode mode = NRT_CAPTURE_MODE_GLOBAL) {
    EXPECT_EQ(nrtStreamBeginCapture(stream_, mode), NRT_SUCCESS) << nrtGetRecentErrMsg();
    body();
    nrtGraph_t graph = nullptr;
    EXPECT_EQ(nrtStreamEndCapture(stream_, &graph), NRT_SUCCESS) << nrtGetRecentErrMsg();
    return graph;
  }

  nrtStream_t stream_ = nullptr;
  nrtStream_t side_ = nullptr;
};

TEST_F(GraphTest, RecordsInsteadOfRunningAndReplaysInOrder) {
  std::vector<int> order;
  std::atomic<int> released{0};
  nrtGraph_t graph = Capture([&] {
    for (int i = 0; i < 3; ++i) {
      NRT_ASSERT_OK(LaunchOwned(stream_, [&order, i] { order.push_back(i); return 0; }, &released));
    }
  });
  ASSERT_NE(graph, nullptr);
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_TRUE(order.empty()) << "captured work must not run";
  size_t count = 0;
  NRT_ASSERT_OK(nrtGraphGetNodeCount(graph, &count));
  EXPECT_EQ(count, 3u);
  for (int replay = 0; replay < 4; ++replay) NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  ASSERT_EQ(order.size(), 12u);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<int>(i % 3));
  EXPECT_EQ(released.load(), 0) << "a graph keeps its tasks' data";
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  EXPECT_EQ(released.load(), 3);
  EXPECT_EQ(nrtGraphDestroy(graph), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtGraphLaunch(graph, stream_, nullptr, 0), NRT_ERROR_INVALID_HANDLE);
}

TEST_F(GraphTest, OwnedLaunchOutsideCaptureReleasesAfterItsRun) {
  std::atomic<int> runs{0};
  std::atomic<int> released{0};
  NRT_ASSERT_OK(LaunchOwned(stream_, [&] { return runs.fetch_add(1), 0; }, &released));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(released.load(), 1);
}

TEST_F(GraphTest, DefaultStreamCannotCaptureAndDoubleBeginFails) {
  EXPECT_EQ(nrtStreamBeginCapture(nullptr, NRT_CAPTURE_MODE_GLOBAL), NRT_ERROR_CAPTURE_UNSUPPORTED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("default stream"), std::string::npos);
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL), NRT_ERROR_CAPTURE_UNSUPPORTED);
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
  uint64_t id = 0;
  NRT_ASSERT_OK(nrtStreamGetCaptureInfo(stream_, &status, &id));
  EXPECT_EQ(status, NRT_CAPTURE_STATUS_ACTIVE);
  EXPECT_GT(id, 0u);
  nrtGraph_t graph = nullptr;
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtStreamGetCaptureInfo(stream_, &status, &id));
  EXPECT_EQ(status, NRT_CAPTURE_STATUS_NONE);
  nrtGraph_t none = nullptr;
  EXPECT_EQ(nrtStreamEndCapture(stream_, &none), NRT_ERROR_INVALID_VALUE);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
}

TEST_F(GraphTest, SyncOnTheCapturingStreamIsRefusedAndTheCaptureGoesOn) {
  std::atomic<int> runs{0};
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_RELAXED));
  NRT_ASSERT_OK(LaunchOwned(stream_, [&] { return runs.fetch_add(1), 0; }, nullptr));
  EXPECT_EQ(nrtStreamSynchronize(stream_), NRT_ERROR_CAPTURE_UNSUPPORTED);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("capturing"), std::string::npos) << message;
  EXPECT_NE(message.find("goes on"), std::string::npos) << message;
  EXPECT_EQ(nrtStreamQuery(stream_), NRT_ERROR_CAPTURE_UNSUPPORTED);
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
  NRT_ASSERT_OK(nrtStreamGetCaptureInfo(stream_, &status, nullptr));
  EXPECT_EQ(status, NRT_CAPTURE_STATUS_ACTIVE);
  NRT_ASSERT_OK(LaunchOwned(stream_, [&] { return runs.fetch_add(10), 0; }, nullptr));
  nrtGraph_t graph = nullptr;
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  EXPECT_EQ(runs.load(), 0);
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(runs.load(), 11) << "both recorded tasks, before and after the refused call";
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
}

TEST_F(GraphTest, ModesDecideWhichOtherSynchronisingCallsAreRefused) {
  // Global: another thread's device sync is refused.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  nrtError_t other = NRT_SUCCESS;
  std::thread([&] { other = nrtDeviceSynchronize(); }).join();
  EXPECT_EQ(other, NRT_ERROR_CAPTURE_UNSUPPORTED);
  nrtGraph_t graph = nullptr;
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));

  // Thread-local: other threads may synchronise, the capturing thread may not.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_THREAD_LOCAL));
  std::thread([&] { other = nrtStreamSynchronize(side_); }).join();
  EXPECT_EQ(other, NRT_SUCCESS);
  EXPECT_EQ(nrtStreamSynchronize(side_), NRT_ERROR_CAPTURE_UNSUPPORTED);
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));

  // Relaxed: only the capturing stream itself is off limits.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_RELAXED));
  NRT_EXPECT_OK(nrtStreamSynchronize(side_));
  char host[8] = {};
  void* device = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&device, sizeof host));
  NRT_EXPECT_OK(nrtMemcpy(device, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE));
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));

  // A thread in relaxed interaction mode may synchronise during a global capture.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  std::thread([&] {
    nrtCaptureMode mode = NRT_CAPTURE_MODE_RELAXED;
    nrtThreadExchangeCaptureMode(&mode);
    other = nrtMemcpy(device, host, sizeof host, NRT_MEMCPY_HOST_TO_DEVICE);
    nrtThreadExchangeCaptureMode(&mode);
    EXPECT_EQ(mode, NRT_CAPTURE_MODE_RELAXED);
  }).join();
  EXPECT_EQ(other, NRT_SUCCESS) << nrtGetRecentErrMsg();
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  NRT_ASSERT_OK(nrtFree(device));
}

TEST_F(GraphTest, ForkedStreamsJoinTheCaptureAndMustJoinBack) {
  nrtEvent_t fork = nullptr;
  nrtEvent_t join = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&fork));
  NRT_ASSERT_OK(nrtEventCreate(&join));
  std::vector<std::string> order;
  nrtGraph_t graph = nullptr;
  // A captured event has not happened: querying it is refused.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_RELAXED));
  NRT_ASSERT_OK(nrtEventRecord(fork, stream_));
  EXPECT_EQ(nrtEventQuery(fork), NRT_ERROR_CAPTURE_UNSUPPORTED);
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  NRT_EXPECT_OK(nrtEventQuery(fork)) << "once its capture is over, the event counts as done";
  graph = Capture([&] {
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { order.push_back("a"); return 0; }, nullptr));
    NRT_ASSERT_OK(nrtEventRecord(fork, stream_));
    NRT_ASSERT_OK(nrtStreamWaitEvent(side_, fork));
    nrtCaptureStatus status = NRT_CAPTURE_STATUS_NONE;
    NRT_ASSERT_OK(nrtStreamGetCaptureInfo(side_, &status, nullptr));
    EXPECT_EQ(status, NRT_CAPTURE_STATUS_ACTIVE);
    NRT_ASSERT_OK(LaunchOwned(side_, [&] { order.push_back("side"); return 0; }, nullptr));
    NRT_ASSERT_OK(nrtEventRecord(join, side_));
    NRT_ASSERT_OK(nrtStreamWaitEvent(stream_, join));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { order.push_back("b"); return 0; }, nullptr));
  });
  ASSERT_NE(graph, nullptr);
  nrtCaptureStatus status = NRT_CAPTURE_STATUS_ACTIVE;
  NRT_ASSERT_OK(nrtStreamGetCaptureInfo(side_, &status, nullptr));
  EXPECT_EQ(status, NRT_CAPTURE_STATUS_NONE) << "the capture's end releases forked streams";
  EXPECT_TRUE(order.empty());
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(order, (std::vector<std::string>{"a", "side", "b"}));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));

  // A fork that never joins back fails the end.
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  NRT_ASSERT_OK(nrtEventRecord(fork, stream_));
  NRT_ASSERT_OK(nrtStreamWaitEvent(side_, fork));
  NRT_ASSERT_OK(LaunchOwned(side_, [] { return 0; }, nullptr));
  EXPECT_EQ(nrtStreamEndCapture(stream_, &graph), NRT_ERROR_CAPTURE_UNSUPPORTED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("not joined back"), std::string::npos) << nrtGetRecentErrMsg();
  NRT_ASSERT_OK(nrtStreamGetCaptureInfo(side_, &status, nullptr));
  EXPECT_EQ(status, NRT_CAPTURE_STATUS_NONE);
  NRT_EXPECT_OK(nrtStreamSynchronize(side_));
  NRT_ASSERT_OK(nrtEventDestroy(fork));
  NRT_ASSERT_OK(nrtEventDestroy(join));
}

TEST_F(GraphTest, WaitingForAPendingEventFromBeforeTheCaptureIsRefused) {
  Gate gate;
  nrtEvent_t before = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&before));
  NRT_ASSERT_OK(LaunchCallable(side_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(before, side_));
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(nrtStreamWaitEvent(stream_, before), NRT_ERROR_CAPTURE_UNSUPPORTED);
  nrtGraph_t graph = nullptr;
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(side_));
  NRT_ASSERT_OK(nrtEventDestroy(before));
}

TEST_F(GraphTest, CopiesAndMemsetsReplayOnTheSameMemoryAndPageableCopiesAreRefused) {
  void* a = nullptr;
  void* b = nullptr;
  void* pinned = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&a, 64));
  NRT_ASSERT_OK(nrtMalloc(&b, 64));
  NRT_ASSERT_OK(nrtMallocHost(&pinned, 64));
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(nrtMemsetAsync(a, 7, 64, stream_));
    NRT_ASSERT_OK(nrtMemcpyAsync(b, a, 64, NRT_MEMCPY_DEVICE_TO_DEVICE, stream_));
    NRT_ASSERT_OK(nrtMemcpyAsync(pinned, b, 64, NRT_MEMCPY_DEVICE_TO_HOST, stream_));
  });
  ASSERT_NE(graph, nullptr);
  std::memset(pinned, 0, 64);
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(static_cast<unsigned char*>(pinned)[63], 7);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));

  char pageable[64] = {};
  NRT_ASSERT_OK(nrtStreamBeginCapture(stream_, NRT_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(nrtMemcpyAsync(a, pageable, 64, NRT_MEMCPY_HOST_TO_DEVICE, stream_), NRT_ERROR_CAPTURE_UNSUPPORTED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("pageable"), std::string::npos);
  NRT_ASSERT_OK(nrtStreamEndCapture(stream_, &graph));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  NRT_ASSERT_OK(nrtFree(a));
  NRT_ASSERT_OK(nrtFree(b));
  NRT_ASSERT_OK(nrtFreeHost(pinned));
}

struct KernelArgs {
  int* counter;
  std::atomic<int>* destroyed;
};

TEST_F(GraphTest, KernelsReplayEveryBlockAndReleaseTheirArgumentsWithTheGraph) {
  std::vector<int> hits(4, 0);
  std::atomic<int> destroyed{0};
  auto* args = new KernelArgs{hits.data(), &destroyed};
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(nrtLaunchKernel(
        "count_blocks", 4, stream_,
        [](void* a) {
          static_cast<KernelArgs*>(a)->counter[nrtGetBlockIdx()] += 1;
          return 0;
        },
        args,
        [](void* a) {
          static_cast<KernelArgs*>(a)->destroyed->fetch_add(1);
          delete static_cast<KernelArgs*>(a);
        }));
  });
  ASSERT_NE(graph, nullptr);
  for (int i = 0; i < 3; ++i) NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(hits, (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(destroyed.load(), 0);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  EXPECT_EQ(destroyed.load(), 1);
}

TEST_F(GraphTest, AFailingTaskEndsTheReplayAndIsReportedWithItsPlace) {
  std::atomic<int> after{0};
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(LaunchOwned(stream_, [] { return 0; }, nullptr, "first_op"));
    NRT_ASSERT_OK(LaunchOwned(stream_, [] {
      nrtSetTaskErrMsg("bad operand");
      return 1;
    }, nullptr, "broken_op"));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { return after.fetch_add(1), 0; }, nullptr, "third_op"));
  });
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  EXPECT_EQ(nrtStreamSynchronize(stream_), NRT_ERROR_TASK_FAILED);
  const std::string message = nrtGetRecentErrMsg();
  EXPECT_NE(message.find("bad operand"), std::string::npos) << message;
  EXPECT_NE(message.find("task 2 of 3"), std::string::npos) << message;
  EXPECT_EQ(after.load(), 0);
  NRT_EXPECT_OK(nrtStreamSynchronize(stream_));
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
}

TEST_F(GraphTest, SlotSeedsBecomeTheReplaysSeeds) {
  std::vector<uint64_t> seen;
  const uint64_t plain = 12345;
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] {
      seen.push_back(nrtReplaySeeded(NRT_REPLAY_SEED_SLOT(0)));
      seen.push_back(nrtReplaySeeded(NRT_REPLAY_SEED_SLOT(1)));
      seen.push_back(nrtReplaySeeded(plain));
      return 0;
    }, nullptr));
  });
  const uint64_t first[2] = {11, 22};
  const uint64_t second[2] = {33, 44};
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, first, 2));
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, second, 2));
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(seen, (std::vector<uint64_t>{11, 22, plain, 33, 44, plain, NRT_REPLAY_SEED_SLOT(0),
                                         NRT_REPLAY_SEED_SLOT(1), plain}));
  EXPECT_EQ(nrtReplaySeeded(NRT_REPLAY_SEED_SLOT(0)), NRT_REPLAY_SEED_SLOT(0)) << "outside replays: unchanged";
  EXPECT_EQ(nrtGraphLaunch(graph, stream_, nullptr, 3), NRT_ERROR_INVALID_VALUE);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
}

TEST_F(GraphTest, DebugDumpListsTheTasks) {
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(LaunchOwned(stream_, [] { return 0; }, nullptr, "aclnnAdd"));
    NRT_ASSERT_OK(LaunchOwned(stream_, [] { return 0; }, nullptr, "aclnnMul"));
  });
  const std::string path = ::testing::TempDir() + "/graph_dump.txt";
  NRT_ASSERT_OK(nrtGraphDebugDump(graph, path.c_str()));
  std::ifstream file(path);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("2 tasks"), std::string::npos) << text;
  EXPECT_LT(text.find("aclnnAdd"), text.find("aclnnMul")) << text;
  EXPECT_EQ(nrtGraphDebugDump(graph, ""), NRT_ERROR_INVALID_VALUE);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  std::remove(path.c_str());
}

TEST_F(GraphTest, TaskGroupsAreReplacedByUpdatesInStreamOrder) {
  std::vector<int> seen;
  nrtTaskGroup_t group = nullptr;
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { seen.push_back(0); return 0; }, nullptr));
    NRT_ASSERT_OK(nrtStreamBeginTaskGroup(stream_));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { seen.push_back(1); return 0; }, nullptr));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { seen.push_back(2); return 0; }, nullptr));
    NRT_ASSERT_OK(nrtStreamEndTaskGroup(stream_, &group));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { seen.push_back(9); return 0; }, nullptr));
  });
  ASSERT_NE(group, nullptr);
  size_t count = 0;
  NRT_ASSERT_OK(nrtGraphGetNodeCount(graph, &count));
  EXPECT_EQ(count, 3u) << "a group is one task of its graph";
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 9}));

  // The update records on its own stream (nothing runs), then swaps in stream order.
  std::atomic<int> released{0};
  NRT_ASSERT_OK(nrtStreamBeginTaskUpdate(side_, group));
  NRT_ASSERT_OK(LaunchOwned(side_, [&] { seen.push_back(5); return 0; }, &released));
  NRT_ASSERT_OK(nrtStreamEndTaskUpdate(side_));
  NRT_ASSERT_OK(nrtStreamSynchronize(side_));
  seen.clear();
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(seen, (std::vector<int>{0, 5, 9}));
  EXPECT_EQ(released.load(), 0);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  EXPECT_EQ(released.load(), 1) << "the group's tasks go with the graph";
  EXPECT_EQ(nrtStreamBeginTaskUpdate(side_, group), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamBeginTaskGroup(stream_), NRT_ERROR_CAPTURE_UNSUPPORTED) << "groups live in captures";
  nrtTaskGroup_t none = nullptr;
  EXPECT_EQ(nrtStreamEndTaskUpdate(side_), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtStreamEndTaskGroup(stream_, &none), NRT_ERROR_CAPTURE_UNSUPPORTED);
}

TEST_F(GraphTest, ExternalEventsAreFlagsThatCapturedWaitsBlockOn) {
  nrtEvent_t flag = nullptr;
  NRT_ASSERT_OK(nrtEventCreateExternal(&flag));
  EXPECT_EQ(nrtEventQuery(flag), NRT_ERROR_NOT_READY);
  std::atomic<int> runs{0};
  nrtGraph_t graph = Capture([&] {
    NRT_ASSERT_OK(nrtStreamWaitEvent(stream_, flag));
    NRT_ASSERT_OK(nrtEventResetAsync(flag, stream_));
    NRT_ASSERT_OK(LaunchOwned(stream_, [&] { return runs.fetch_add(1), 0; }, nullptr));
  });
  ASSERT_NE(graph, nullptr);
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(runs.load(), 0) << "the replay waits for the flag";
  EXPECT_EQ(nrtStreamQuery(stream_), NRT_ERROR_NOT_READY);
  NRT_ASSERT_OK(nrtEventRecord(flag, side_));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(nrtEventQuery(flag), NRT_ERROR_NOT_READY) << "the replay reset it";
  NRT_ASSERT_OK(nrtEventRecord(flag, side_));
  NRT_ASSERT_OK(nrtGraphLaunch(graph, stream_, nullptr, 0));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_));
  EXPECT_EQ(runs.load(), 2);
  nrtEvent_t plain = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&plain));
  EXPECT_EQ(nrtEventResetAsync(plain, stream_), NRT_ERROR_INVALID_VALUE);
  NRT_ASSERT_OK(nrtGraphDestroy(graph));
  NRT_ASSERT_OK(nrtEventDestroy(flag));
  NRT_ASSERT_OK(nrtEventDestroy(plain));
}

}  // namespace
}  // namespace npu::runtime::testing

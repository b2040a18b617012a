// StreamTest.cpp - stream order, sync and query, destruction, handles, concurrency, task errors.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

using StreamTest = RuntimeTest;

std::string RecentMessage() { return nrtGetRecentErrMsg(); }

TEST_F(StreamTest, QueryIsNotReadyUntilPendingWorkRuns) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_EXPECT_OK(nrtStreamQuery(stream));
  Gate gate;
  std::atomic<int> ran{0};
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(stream, [&] { return ran.fetch_add(1), 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_NOT_READY);
  EXPECT_EQ(ran.load(), 0);
  gate.Open();
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(ran.load(), 1);
  NRT_EXPECT_OK(nrtStreamQuery(stream));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, TaskCountAdvancesWithEachEnqueuedTask) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  uint64_t before = 0, after = 0;
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &before));
  EXPECT_EQ(before, 0u);
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(stream, [] { return 0; }));
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &after));
  EXPECT_EQ(after, 2u) << "counted when enqueued, not when run";
  nrtEvent_t event = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&event));
  NRT_ASSERT_OK(nrtEventRecord(event, stream));
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &after));
  EXPECT_EQ(after, 2u) << "recording an event enqueues no task";
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &after));
  EXPECT_EQ(after, 2u);
  EXPECT_EQ(nrtStreamGetTaskCount(stream, nullptr), NRT_ERROR_INVALID_VALUE);
  NRT_EXPECT_OK(nrtEventDestroy(event));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
  EXPECT_EQ(nrtStreamGetTaskCount(stream, &after), NRT_ERROR_INVALID_HANDLE);
}

TEST_F(StreamTest, TasksRunInOrderOnTheDefaultStream) {
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) {
    NRT_ASSERT_OK(LaunchCallable(nullptr, [&order, i] { return order.push_back(i), 0; }));
  }
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(StreamTest, DestroyWaitsForPendingWork) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    NRT_ASSERT_OK(LaunchCallable(stream, [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      return ran.fetch_add(1), 0;
    }));
  }
  NRT_ASSERT_OK(nrtStreamDestroy(stream));
  EXPECT_EQ(ran.load(), 50);
}

TEST_F(StreamTest, DestroyedAndUnknownHandlesAreInvalid) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtStreamDestroy(stream));
  int32_t device = 0;
  auto noop = [](void*) { return 0; };
  EXPECT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_INVALID_HANDLE);
  EXPECT_NE(RecentMessage().find("is not a live stream"), std::string::npos) << RecentMessage();
  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamGetDevice(stream, &device), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtLaunchHostFunc(stream, noop, nullptr), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamDestroy(stream), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamQuery(reinterpret_cast<nrtStream_t>(0xdeadbeef)), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamDestroy(nullptr), NRT_ERROR_INVALID_HANDLE) << "the default stream stays";
  EXPECT_EQ(nrtLaunchHostFunc(nullptr, nullptr, nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtStreamCreate(nullptr), NRT_ERROR_INVALID_VALUE);
}

TEST_F(StreamTest, HandlesDoNotSurviveFinalize) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtFinalize());
  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_INVALID_HANDLE);
  nrtStream_t fresh = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&fresh));
  EXPECT_NE(fresh, stream) << "handles are never reused";
  NRT_EXPECT_OK(nrtStreamDestroy(fresh));
}

TEST_F(StreamTest, ManyHostThreadsOnManyStreams) {
  constexpr int kThreads = 8;
  constexpr int kStreamsPerThread = 2;
  constexpr int kTasksPerStream = 2000;
  std::atomic<int64_t> total{0};
  std::atomic<int> out_of_order{0};
  std::atomic<int> api_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (nrtSetDevice(t % 4) != NRT_SUCCESS) ++api_errors;
      nrtStream_t streams[kStreamsPerThread] = {};
      std::vector<int> next(kStreamsPerThread, 0);
      for (auto& stream : streams) {
        if (nrtStreamCreate(&stream) != NRT_SUCCESS) ++api_errors;
      }
      for (int i = 0; i < kTasksPerStream; ++i) {
        for (int s = 0; s < kStreamsPerThread; ++s) {
          const nrtError_t error = LaunchCallable(streams[s], [&, s, i] {
            if (next[s]++ != i) ++out_of_order;
            total.fetch_add(1);
            return 0;
          });
          if (error != NRT_SUCCESS) ++api_errors;
        }
      }
      if (nrtDeviceSynchronize() != NRT_SUCCESS) ++api_errors;
      for (int s = 0; s < kStreamsPerThread; ++s) {
        if (next[s] != kTasksPerStream) ++out_of_order;
        if (nrtStreamDestroy(streams[s]) != NRT_SUCCESS) ++api_errors;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(api_errors.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  EXPECT_EQ(total.load(), int64_t{kThreads} * kStreamsPerThread * kTasksPerStream);
}

TEST_F(StreamTest, TaskFailureIsReportedOnceAtTheNextSyncAndTheStreamKeepsWorking) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  std::atomic<int> ran_after{0};
  NRT_ASSERT_OK(LaunchCallable(stream, [] {
    nrtSetTaskErrMsg("add_ failed: shapes [2] and [3] do not broadcast (model.py:12)");
    return 3;
  }));
  NRT_ASSERT_OK(LaunchCallable(stream, [&] { return ran_after.fetch_add(1), 0; }));
  EXPECT_EQ(nrtStreamSynchronize(stream), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "add_ failed: shapes [2] and [3] do not broadcast (model.py:12)");
  EXPECT_EQ(ran_after.load(), 1) << "tasks after a failure still run";
  NRT_EXPECT_OK(nrtStreamSynchronize(stream)) << "reported exactly once";

  NRT_ASSERT_OK(LaunchCallable(stream, [&] { return ran_after.fetch_add(1), 0; }));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(ran_after.load(), 2);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, OnlyTheFirstFailureIsKeptWithACountOfTheRest) {
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return 7; }));
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return nrtSetTaskErrMsg("second"), 1; }));
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return 2; }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "host function failed with code 7 (and 2 more failed tasks)");
}

TEST_F(StreamTest, TaskErrMsgOfASucceedingFunctionIsIgnored) {
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return nrtSetTaskErrMsg("only a warning"), 0; }));
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return 5; }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "host function failed with code 5");
}

TEST_F(StreamTest, ExceptionsInHostFunctionsBecomeTaskErrors) {
  NRT_ASSERT_OK(LaunchCallable(nullptr, []() -> int { throw std::runtime_error("bad kernel"); }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "bad kernel");
  NRT_ASSERT_OK(LaunchCallable(nullptr, []() -> int { throw 42; }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_NE(RecentMessage().find("not a std::exception"), std::string::npos) << RecentMessage();
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
}

TEST_F(StreamTest, DeviceSynchronizeWaitsForAndReportsOnlyItsDevice) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    NRT_ASSERT_OK(LaunchCallable(stream, [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      return ran.fetch_add(1), 0;
    }));
  }
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return nrtSetTaskErrMsg("failed on npu:0"), 1; }));
  NRT_ASSERT_OK(nrtSetDevice(1));
  NRT_EXPECT_OK(nrtDeviceSynchronize());
  NRT_ASSERT_OK(nrtSetDevice(0));
  EXPECT_EQ(nrtDeviceSynchronize(), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "failed on npu:0");
  EXPECT_EQ(ran.load(), 20);
  NRT_EXPECT_OK(nrtDeviceSynchronize());
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr)) << "already reported by the device sync";
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, WaitingForItselfIsRejected) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  nrtError_t sync_result = NRT_SUCCESS;
  nrtError_t destroy_result = NRT_SUCCESS;
  NRT_ASSERT_OK(LaunchCallable(stream, [&] {
    sync_result = nrtStreamSynchronize(stream);
    destroy_result = nrtStreamDestroy(stream);
    return 0;
  }));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(sync_result, NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(destroy_result, NRT_ERROR_INVALID_VALUE);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, AWorkerSeesWhetherTheHostWaitsForItsStream) {
  EXPECT_EQ(nrtWorkerHostWaiting(), -1);  // not a stream worker
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  Gate gate;
  std::atomic<int> before{-2}, after{-2};
  NRT_ASSERT_OK(LaunchCallable(stream, [&] {
    before = nrtWorkerHostWaiting();  // the host has not started to wait yet
    return 0;
  }));
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(stream, [&] {
    after = nrtWorkerHostWaiting();
    return 0;
  }));
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.Open();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(before.load(), 0);
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));  // blocks until the gate opens
  opener.join();
  EXPECT_EQ(after.load(), 1);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, FinalizeDrainsStreams) {
  std::atomic<int> ran{0};
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  for (nrtStream_t target : {stream, static_cast<nrtStream_t>(nullptr)}) {
    NRT_ASSERT_OK(LaunchCallable(target, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return ran.fetch_add(1), 0;
    }));
  }
  NRT_ASSERT_OK(nrtFinalize());
  EXPECT_EQ(ran.load(), 2);
}

nrtError_t LaunchShort(nrtStream_t stream, std::function<int()> fn) {
  return LaunchCallable(stream, std::move(fn), /*short_task=*/true);
}

TEST_F(StreamTest, ShortLaunchRunsOnTheCallerWhenTheStreamIsIdleAndIsCounted) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  // Run on the caller once this thread has made the last few short launches in a row.
  constexpr int kLaunches = 64;
  std::vector<std::thread::id> ran_on(kLaunches);
  for (int i = 0; i < kLaunches; ++i) {
    NRT_ASSERT_OK(LaunchShort(stream, [&, i] { return ran_on[i] = std::this_thread::get_id(), 0; }));
    NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  }
  EXPECT_EQ(ran_on.back(), std::this_thread::get_id()) << "run before the launch returned, on the caller";
  uint64_t count = 0;
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &count));
  EXPECT_EQ(count, uint64_t{kLaunches}) << "tasks of the stream like queued ones";
  NRT_EXPECT_OK(nrtStreamQuery(stream));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, ShortLaunchBehindQueuedWorkWaitsItsTurnOnTheWorker) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  Gate gate;
  std::vector<int> order;
  std::thread::id ran_on;
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(stream, [&] { return order.push_back(1), 0; }));
  NRT_ASSERT_OK(LaunchShort(stream, [&] { return ran_on = std::this_thread::get_id(), order.push_back(2), 0; }));
  EXPECT_TRUE(order.empty()) << "not run ahead of the queued tasks";
  EXPECT_EQ(nrtStreamQuery(stream), NRT_ERROR_NOT_READY);
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on, std::this_thread::get_id()) << "queued, so run by the stream's worker";
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

TEST_F(StreamTest, ShortLaunchFailureIsReportedAtTheNextSyncNotByTheLaunch) {
  std::thread::id ran_on;
  for (int i = 0; i < 64; ++i) {  // this thread becomes the sole launcher: the launches below run on it
    NRT_ASSERT_OK(LaunchShort(nullptr, [&] { return ran_on = std::this_thread::get_id(), 0; }));
    NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));  // idle again for the next one
  }
  ASSERT_EQ(ran_on, std::this_thread::get_id());
  NRT_ASSERT_OK(LaunchShort(nullptr, [] { return nrtSetTaskErrMsg("aclnnAdd failed: bad operand (t.py:3)"), 1; }));
  std::atomic<int> ran_after{0};
  NRT_ASSERT_OK(LaunchShort(nullptr, [&] { return ran_after.fetch_add(1), 0; }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "aclnnAdd failed: bad operand (t.py:3)");
  EXPECT_EQ(ran_after.load(), 1);
  NRT_ASSERT_OK(LaunchShort(nullptr, []() -> int { throw std::runtime_error("bad kernel"); }));
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
  EXPECT_EQ(RecentMessage(), "bad kernel");
  NRT_EXPECT_OK(nrtStreamSynchronize(nullptr));
}

TEST_F(StreamTest, ShortAndQueuedLaunchesFromManyThreadsKeepEachThreadsOrder) {
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  constexpr int kThreads = 4;
  constexpr int kTasks = 2000;
  std::vector<int> last(kThreads, -1);  // touched only by the stream's tasks, which never overlap
  std::atomic<int> running{0};
  std::atomic<int> overlapped{0}, out_of_order{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks; ++i) {
        auto body = [&, t, i] {
          if (running.fetch_add(1) != 0) overlapped.fetch_add(1);
          if (last[t] != i - 1) out_of_order.fetch_add(1);
          last[t] = i;
          running.fetch_sub(1);
          return 0;
        };
        const nrtError_t error = i % 3 == 0 ? LaunchCallable(stream, body) : LaunchShort(stream, body);
        if (error != NRT_SUCCESS) out_of_order.fetch_add(1000000);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream));
  EXPECT_EQ(overlapped.load(), 0) << "a stream runs one task at a time";
  EXPECT_EQ(out_of_order.load(), 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(last[t], kTasks - 1);
  uint64_t count = 0;
  NRT_ASSERT_OK(nrtStreamGetTaskCount(stream, &count));
  EXPECT_EQ(count, uint64_t{kThreads} * kTasks);
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
}

}  // namespace
}  // namespace npu::runtime::testing

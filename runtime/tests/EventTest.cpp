// EventTest.cpp - event record/sync/query, elapsed time, cross-stream waits, handle errors.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

class EventTest : public RuntimeTest {
 protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    NRT_ASSERT_OK(nrtStreamCreate(&stream_a_));
    NRT_ASSERT_OK(nrtStreamCreate(&stream_b_));
    NRT_ASSERT_OK(nrtEventCreate(&start_));
    NRT_ASSERT_OK(nrtEventCreate(&end_));
  }
  void TearDown() override {
    NRT_EXPECT_OK(nrtEventDestroy(start_));
    NRT_EXPECT_OK(nrtEventDestroy(end_));
    NRT_EXPECT_OK(nrtStreamDestroy(stream_a_));
    NRT_EXPECT_OK(nrtStreamDestroy(stream_b_));
    RuntimeTest::TearDown();
  }

  nrtStream_t stream_a_ = nullptr;
  nrtStream_t stream_b_ = nullptr;
  nrtEvent_t start_ = nullptr;
  nrtEvent_t end_ = nullptr;
};

TEST_F(EventTest, CompletesWhenTheStreamReachesIt) {
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream_a_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  EXPECT_EQ(nrtEventQuery(start_), NRT_ERROR_NOT_READY);
  gate.Open();
  NRT_EXPECT_OK(nrtEventSynchronize(start_));
  NRT_EXPECT_OK(nrtEventQuery(start_));
}

TEST_F(EventTest, NeverRecordedEventsAreComplete) {
  NRT_EXPECT_OK(nrtEventQuery(start_));
  NRT_EXPECT_OK(nrtEventSynchronize(start_));
}

TEST_F(EventTest, ElapsedTimeMeasuresTheWorkBetweenRecords) {
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  NRT_ASSERT_OK(LaunchCallable(stream_a_, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
  }));
  NRT_ASSERT_OK(nrtEventRecord(end_, stream_a_));
  NRT_ASSERT_OK(nrtEventSynchronize(end_));
  float ms = -1;
  NRT_ASSERT_OK(nrtEventElapsedTime(&ms, start_, end_));
  EXPECT_GE(ms, 15.0f);
}

TEST_F(EventTest, ElapsedTimeNeedsTwoCompletedRecords) {
  float ms = 0;
  EXPECT_EQ(nrtEventElapsedTime(&ms, start_, end_), NRT_ERROR_EVENT_NOT_RECORDED);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("never recorded"), std::string::npos);
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  EXPECT_EQ(nrtEventElapsedTime(&ms, start_, end_), NRT_ERROR_EVENT_NOT_RECORDED);

  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream_a_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(end_, stream_a_));
  EXPECT_EQ(nrtEventElapsedTime(&ms, start_, end_), NRT_ERROR_NOT_READY);
  EXPECT_EQ(nrtEventElapsedTime(nullptr, start_, end_), NRT_ERROR_INVALID_VALUE);
  gate.Open();
  NRT_ASSERT_OK(nrtEventSynchronize(end_));
  NRT_EXPECT_OK(nrtEventElapsedTime(&ms, start_, end_));
  EXPECT_GE(ms, 0.0f);
}

TEST_F(EventTest, ReRecordingRefersToTheLatestRecord) {
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  NRT_ASSERT_OK(nrtEventSynchronize(start_));
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream_b_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_b_));
  EXPECT_EQ(nrtEventQuery(start_), NRT_ERROR_NOT_READY);
  gate.Open();
  NRT_EXPECT_OK(nrtEventSynchronize(start_));
  NRT_EXPECT_OK(nrtEventQuery(start_));
}

TEST_F(EventTest, StreamWaitEventOrdersWorkAcrossStreams) {
  std::atomic<int> sequence{0};
  int slow_task_position = -1;
  int waiting_task_position = -1;
  NRT_ASSERT_OK(LaunchCallable(stream_a_, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    slow_task_position = sequence.fetch_add(1);
    return 0;
  }));
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  NRT_ASSERT_OK(nrtStreamWaitEvent(stream_b_, start_));
  NRT_ASSERT_OK(LaunchCallable(stream_b_, [&] {
    waiting_task_position = sequence.fetch_add(1);
    return 0;
  }));
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_b_));
  EXPECT_EQ(slow_task_position, 0);
  EXPECT_EQ(waiting_task_position, 1);
  NRT_EXPECT_OK(nrtStreamSynchronize(stream_a_));
}

TEST_F(EventTest, StreamWaitBlocksOnlyUntilTheRecordAsOfTheCall) {
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream_a_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  NRT_ASSERT_OK(nrtStreamWaitEvent(stream_b_, start_));
  std::atomic<bool> ran{false};
  NRT_ASSERT_OK(LaunchCallable(stream_b_, [&] { return ran = true, 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(nrtStreamQuery(stream_b_), NRT_ERROR_NOT_READY);
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_b_));
  EXPECT_TRUE(ran.load());
}

TEST_F(EventTest, WaitingOnANeverRecordedEventIsANoOp) {
  NRT_ASSERT_OK(nrtStreamWaitEvent(stream_b_, start_));
  NRT_EXPECT_OK(nrtStreamSynchronize(stream_b_));
}

TEST_F(EventTest, DestroyingAnEventAStreamWaitsOnIsSafe) {
  nrtEvent_t doomed = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&doomed));
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(stream_a_, gate.Blocker()));
  NRT_ASSERT_OK(nrtEventRecord(doomed, stream_a_));
  NRT_ASSERT_OK(nrtStreamWaitEvent(stream_b_, doomed));
  NRT_ASSERT_OK(nrtEventDestroy(doomed));
  std::atomic<bool> ran{false};
  NRT_ASSERT_OK(LaunchCallable(stream_b_, [&] { return ran = true, 0; }));
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(stream_b_));
  EXPECT_TRUE(ran.load());
}

TEST_F(EventTest, DestroyedAndUnknownEventsAreInvalidHandles) {
  nrtEvent_t event = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&event));
  NRT_ASSERT_OK(nrtEventDestroy(event));
  float ms = 0;
  EXPECT_EQ(nrtEventRecord(event, stream_a_), NRT_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("is not a live event"), std::string::npos);
  EXPECT_EQ(nrtEventSynchronize(event), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtEventQuery(event), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtEventElapsedTime(&ms, event, end_), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtStreamWaitEvent(stream_a_, event), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtEventDestroy(event), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtEventQuery(nullptr), NRT_ERROR_INVALID_HANDLE);
  EXPECT_EQ(nrtEventCreate(nullptr), NRT_ERROR_INVALID_VALUE);
}

TEST_F(EventTest, EventSynchronizeReportsTheFailureOfItsStream) {
  NRT_ASSERT_OK(LaunchCallable(stream_a_, [] { return nrtSetTaskErrMsg("conv2d failed"), 1; }));
  NRT_ASSERT_OK(nrtEventRecord(start_, stream_a_));
  EXPECT_EQ(nrtEventSynchronize(start_), NRT_ERROR_TASK_FAILED);
  EXPECT_STREQ(nrtGetRecentErrMsg(), "conv2d failed");
  NRT_EXPECT_OK(nrtEventSynchronize(start_)) << "reported once";
  NRT_EXPECT_OK(nrtStreamSynchronize(stream_a_)) << "consumed by the event sync";
}

TEST_F(EventTest, RecordOnTheDefaultStream) {
  NRT_ASSERT_OK(nrtEventRecord(start_, nullptr));
  NRT_ASSERT_OK(nrtEventRecord(end_, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  NRT_EXPECT_OK(nrtEventQuery(end_));
  float ms = -1;
  NRT_EXPECT_OK(nrtEventElapsedTime(&ms, start_, end_));
  EXPECT_GE(ms, 0.0f);
}

}  // namespace
}  // namespace npu::runtime::testing

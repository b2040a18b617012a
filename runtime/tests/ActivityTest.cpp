// ActivityTest.cpp - activity records: one per task of each kind with its stream, times in order and
// correlation ids; nothing while off; a bounded buffer that drops instead of blocking; flush.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "RuntimeTest.h"
#include "npu/activity.h"
#include "npu/kernel_launch.h"

namespace npu::runtime::testing {
namespace {

class ActivityTest : public RuntimeTest {
 protected:
  void TearDown() override {
    nrtActivityDisable();
    RuntimeTest::TearDown();
  }

  std::vector<nrtActivityRecord> FlushAndDrain() {
    EXPECT_EQ(nrtActivityFlush(10000), NRT_SUCCESS) << nrtGetRecentErrMsg();
    std::vector<nrtActivityRecord> out(4096);
    size_t n = 0;
    EXPECT_EQ(nrtActivityDrain(out.data(), out.size(), &n), NRT_SUCCESS);
    out.resize(n);
    return out;
  }
};

int Noop(void*) { return 0; }
int Fail(void*) {
  nrtSetTaskErrMsg("refused");
  return 1;
}

int EmptyBlock(void*) { return 0; }

TEST_F(ActivityTest, NothingIsRecordedWhileOff) {
  std::vector<nrtActivityRecord> earlier(4096);  // what an earlier session left undrained
  size_t left = 0;
  NRT_ASSERT_OK(nrtActivityDrain(earlier.data(), earlier.size(), &left));
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(nrtActivityIsEnabled(), 0);
  nrtActivityRecord rec{};
  size_t n = 7;
  NRT_ASSERT_OK(nrtActivityDrain(&rec, 1, &n));
  EXPECT_EQ(n, 0u);
}

TEST_F(ActivityTest, EveryKindOfTaskGetsARecord) {
  nrtStream_t stream = nullptr, other = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtStreamCreate(&other));
  void* dev = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&dev, 4096));
  std::vector<char> host(4096, 1);
  nrtEvent_t event = nullptr;
  NRT_ASSERT_OK(nrtEventCreate(&event));
  Gate gate;

  NRT_ASSERT_OK(nrtActivityEnable(0));
  EXPECT_EQ(nrtActivityIsEnabled(), 1);
  nrtActivityPushCorrelationId(41);
  NRT_ASSERT_OK(LaunchCallable(stream, gate.Blocker()));  // holds the stream so the event is pending
  nrtActivityLabelNextTask(NRT_ACTIVITY_DEVICE_OP, "aclnnAdd", 0);
  NRT_ASSERT_OK(nrtLaunchHostFunc(stream, &Noop, nullptr));
  nrtActivityPushCorrelationId(42);
  NRT_ASSERT_OK(nrtMemcpyAsync(dev, host.data(), 4096, NRT_MEMCPY_HOST_TO_DEVICE, stream));
  nrtActivityPopCorrelationId();
  NRT_ASSERT_OK(nrtMemsetAsync(dev, 0, 1024, stream));
  NRT_ASSERT_OK(nrtLaunchKernel("my_kernel", 3, stream, &EmptyBlock, nullptr, nullptr));
  NRT_ASSERT_OK(nrtEventRecord(event, stream));
  NRT_ASSERT_OK(nrtStreamWaitEvent(other, event));
  NRT_ASSERT_OK(nrtLaunchHostFunc(other, &Noop, nullptr));
  nrtActivityPopCorrelationId();
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(other));
  NRT_ASSERT_OK(nrtMemcpy(host.data(), dev, 512, NRT_MEMCPY_DEVICE_TO_HOST));
  std::vector<nrtActivityRecord> recs = FlushAndDrain();
  ASSERT_EQ(recs.size(), 9u);
  std::sort(recs.begin(), recs.end(), [](auto& a, auto& b) { return a.sequence < b.sequence; });

  const uint64_t s1 = recs[0].stream_id;
  struct Expect {
    nrtActivityKind kind;
    const char* name;
    uint64_t correlation;
  };
  const std::vector<Expect> expected = {
      {NRT_ACTIVITY_HOST_TASK, "host function", 41}, {NRT_ACTIVITY_DEVICE_OP, "aclnnAdd", 41},
      {NRT_ACTIVITY_MEMCPY, "memcpy", 42},           {NRT_ACTIVITY_MEMSET, "memset", 41},
      {NRT_ACTIVITY_KERNEL, "my_kernel", 41},        {NRT_ACTIVITY_EVENT_RECORD, "event record", 41},
      {NRT_ACTIVITY_EVENT_WAIT, "event wait", 41},   {NRT_ACTIVITY_HOST_TASK, "host function", 41},
      {NRT_ACTIVITY_MEMCPY, "memcpy", 0},
  };
  for (size_t i = 0; i < recs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(recs[i].kind, static_cast<uint32_t>(expected[i].kind));
    EXPECT_STREQ(recs[i].name, expected[i].name);
    EXPECT_EQ(recs[i].correlation_id, expected[i].correlation);
    EXPECT_EQ(recs[i].device, 0);
    EXPECT_EQ(recs[i].failed, 0u);
    EXPECT_NE(recs[i].launch_tid, 0u);
    EXPECT_LE(recs[i].api_start_ns, recs[i].enqueue_ns);
    EXPECT_LE(recs[i].enqueue_ns, recs[i].start_ns);
    EXPECT_LE(recs[i].start_ns, recs[i].end_ns);
  }
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(recs[i].stream_id, s1);
  EXPECT_NE(recs[6].stream_id, s1);
  EXPECT_EQ(recs[6].stream_id, recs[7].stream_id);
  EXPECT_EQ(recs[8].stream_id, 0u);  // nrtMemcpy runs on the caller
  EXPECT_EQ(recs[2].bytes, 4096u);
  EXPECT_EQ(recs[2].memcpy_kind, static_cast<uint32_t>(NRT_MEMCPY_HOST_TO_DEVICE));
  EXPECT_EQ(recs[3].bytes, 1024u);
  EXPECT_EQ(recs[4].block_dim, 3u);
  EXPECT_EQ(recs[8].memcpy_kind, static_cast<uint32_t>(NRT_MEMCPY_DEVICE_TO_HOST));
  // One stream runs its tasks in order, one at a time; the waiting stream resumes after the record.
  for (size_t i = 1; i < 5; ++i) EXPECT_GE(recs[i].start_ns, recs[i - 1].end_ns);
  EXPECT_GE(recs[5].end_ns, recs[4].end_ns);
  EXPECT_GE(recs[6].end_ns, recs[5].end_ns);
  EXPECT_GE(recs[7].start_ns, recs[6].end_ns);
  // The clock is the one nrtActivityTimestamp reads.
  EXPECT_LE(recs[8].end_ns, nrtActivityTimestamp());

  NRT_EXPECT_OK(nrtEventDestroy(event));
  NRT_EXPECT_OK(nrtFree(dev));
  NRT_EXPECT_OK(nrtStreamDestroy(stream));
  NRT_EXPECT_OK(nrtStreamDestroy(other));
}

TEST_F(ActivityTest, FailedTasksAreMarked) {
  NRT_ASSERT_OK(nrtActivityEnable(0));
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Fail, nullptr));
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  std::vector<nrtActivityRecord> recs = FlushAndDrain();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].failed, 1u);
  EXPECT_EQ(recs[1].failed, 0u);
  // The flush left the failure to the stream's next synchronisation.
  EXPECT_EQ(nrtStreamSynchronize(nullptr), NRT_ERROR_TASK_FAILED);
}

TEST_F(ActivityTest, AFullBufferDropsRecordsAndNeverBlocksTheStream) {
  NRT_ASSERT_OK(nrtActivityEnable(4));
  for (int i = 0; i < 10; ++i) NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  std::vector<nrtActivityRecord> recs = FlushAndDrain();
  EXPECT_EQ(recs.size(), 4u);
  EXPECT_EQ(nrtActivityDropped(), 6u);
  // Draining makes room again.
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  EXPECT_EQ(FlushAndDrain().size(), 1u);
}

TEST_F(ActivityTest, OnlyTasksLaunchedWhileOnAreRecordedAndTheyOutliveDisable) {
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(nullptr, gate.Blocker()));  // before enabling: not recorded
  NRT_ASSERT_OK(nrtActivityEnable(0));
  nrtActivityLabelNextTask(NRT_ACTIVITY_COLLECTIVE, "recorded", 64);
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  NRT_ASSERT_OK(nrtActivityDisable());
  EXPECT_EQ(nrtActivityIsEnabled(), 0);
  nrtActivityLabelNextTask(NRT_ACTIVITY_DEVICE_OP, "ignored", 0);
  NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));  // after disabling: not recorded
  // The recorded task is still queued behind the gate: the flush waits for it, up to its timeout.
  EXPECT_EQ(nrtActivityFlush(20), NRT_ERROR_NOT_READY);
  EXPECT_NE(std::string(nrtGetRecentErrMsg()).find("1 recorded task(s) had not finished"), std::string::npos)
      << nrtGetRecentErrMsg();
  gate.Open();
  std::vector<nrtActivityRecord> recs = FlushAndDrain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_STREQ(recs[0].name, "recorded");
  EXPECT_EQ(recs[0].kind, static_cast<uint32_t>(NRT_ACTIVITY_COLLECTIVE));
  EXPECT_EQ(recs[0].bytes, 64u);
}

TEST_F(ActivityTest, FlushFromAHostFunctionIsRefused) {
  NRT_ASSERT_OK(nrtActivityEnable(0));
  nrtError_t inner = NRT_SUCCESS;
  NRT_ASSERT_OK(LaunchCallable(nullptr, [&] {
    inner = nrtActivityFlush(1000);
    return 0;
  }));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(inner, NRT_ERROR_INVALID_VALUE);
}

TEST_F(ActivityTest, EnableStartsAFreshSession) {
  NRT_ASSERT_OK(nrtActivityEnable(2));
  for (int i = 0; i < 3; ++i) NRT_ASSERT_OK(nrtLaunchHostFunc(nullptr, &Noop, nullptr));
  NRT_ASSERT_OK(nrtActivityFlush(10000));
  EXPECT_EQ(nrtActivityDropped(), 1u);
  NRT_ASSERT_OK(nrtActivityEnable(0));
  EXPECT_EQ(nrtActivityDropped(), 0u);
  EXPECT_TRUE(FlushAndDrain().empty());
  size_t n = 0;
  EXPECT_EQ(nrtActivityDrain(nullptr, 1, &n), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtActivityFlush(-1), NRT_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace npu::runtime::testing

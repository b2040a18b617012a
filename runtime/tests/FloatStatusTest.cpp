// FloatStatusTest.cpp - the overflow flag: raised from host functions, read and reset in stream
// order, per device, cleared by nrtFinalize(); the detection switch.
#include <cstring>

#include "RuntimeTest.h"

namespace npu::runtime::testing {
namespace {

class FloatStatusTest : public RuntimeTest {
 protected:
  // The status of `stream`'s device as the stream sees it now.
  float ReadStatus(nrtStream_t stream) {
    void* status = nullptr;
    float words[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    EXPECT_EQ(nrtMalloc(&status, sizeof words), NRT_SUCCESS);
    EXPECT_EQ(nrtGetOverflowStatus(status, sizeof words, stream), NRT_SUCCESS) << nrtGetRecentErrMsg();
    EXPECT_EQ(nrtStreamSynchronize(stream), NRT_SUCCESS);
    EXPECT_EQ(nrtMemcpy(words, status, sizeof words, NRT_MEMCPY_DEVICE_TO_HOST), NRT_SUCCESS);
    nrtFree(status);
    for (int i = 1; i < 8; ++i) EXPECT_EQ(words[i], 0.0f) << "word " << i;
    return words[0];
  }
};

TEST_F(FloatStatusTest, RaisedByAHostFunctionAndReadInStreamOrder) {
  EXPECT_EQ(ReadStatus(nullptr), 0.0f);
  Gate gate;
  NRT_ASSERT_OK(LaunchCallable(nullptr, gate.Blocker()));
  NRT_ASSERT_OK(LaunchCallable(nullptr, [] { return nrtRaiseOverflowStatus() == NRT_SUCCESS ? 0 : 1; }));
  void* status = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&status, 32));
  // Queued behind the raise: it must see it even though the raise has not run yet.
  NRT_ASSERT_OK(nrtGetOverflowStatus(status, 32, nullptr));
  gate.Open();
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  float word = 0;
  NRT_ASSERT_OK(nrtMemcpy(&word, status, sizeof word, NRT_MEMCPY_DEVICE_TO_HOST));
  EXPECT_EQ(word, 1.0f);
  nrtFree(status);
  // Sticky until reset.
  EXPECT_EQ(ReadStatus(nullptr), 1.0f);
  NRT_ASSERT_OK(nrtResetOverflowStatus(nullptr));
  EXPECT_EQ(ReadStatus(nullptr), 0.0f);
}

TEST_F(FloatStatusTest, FlagsArePerDevice) {
  NRT_ASSERT_OK(nrtSetDevice(1));
  nrtStream_t s1 = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&s1));
  NRT_ASSERT_OK(LaunchCallable(s1, [] { return nrtRaiseOverflowStatus() == NRT_SUCCESS ? 0 : 1; }));
  NRT_ASSERT_OK(nrtStreamSynchronize(s1));
  EXPECT_EQ(ReadStatus(s1), 1.0f);
  NRT_ASSERT_OK(nrtSetDevice(0));
  EXPECT_EQ(ReadStatus(nullptr), 0.0f);
  NRT_ASSERT_OK(nrtSetDevice(1));
  NRT_ASSERT_OK(nrtStreamDestroy(s1));
  NRT_ASSERT_OK(nrtResetOverflowStatus(nullptr));
  EXPECT_EQ(ReadStatus(nullptr), 0.0f);
}

TEST_F(FloatStatusTest, FinalizeClearsTheFlags) {
  NRT_ASSERT_OK(nrtRaiseOverflowStatus());
  EXPECT_EQ(ReadStatus(nullptr), 1.0f);
  NRT_ASSERT_OK(nrtFinalize());
  EXPECT_EQ(ReadStatus(nullptr), 0.0f);
}

TEST_F(FloatStatusTest, BadOutputIsRejected) {
  float host[8];
  EXPECT_EQ(nrtGetOverflowStatus(host, sizeof host, nullptr), NRT_ERROR_INVALID_POINTER);
  EXPECT_NE(std::strstr(nrtGetRecentErrMsg(), "not inside one device allocation"), nullptr)
      << nrtGetRecentErrMsg();
  void* status = nullptr;
  NRT_ASSERT_OK(nrtMalloc(&status, 16));
  EXPECT_EQ(nrtGetOverflowStatus(status, 2, nullptr), NRT_ERROR_INVALID_VALUE);
  EXPECT_EQ(nrtGetOverflowStatus(status, 32, nullptr), NRT_ERROR_INVALID_POINTER);  // overruns
  nrtFree(status);
}

TEST_F(FloatStatusTest, DetectionSwitch) {
  const int before = nrtOverflowDetectionEnabled();
  NRT_ASSERT_OK(nrtSetOverflowDetection(1));
  EXPECT_EQ(nrtOverflowDetectionEnabled(), 1);
  NRT_ASSERT_OK(nrtSetOverflowDetection(0));
  EXPECT_EQ(nrtOverflowDetectionEnabled(), 0);
  NRT_ASSERT_OK(nrtSetOverflowDetection(before));
}

}  // namespace
}  // namespace npu::runtime::testing

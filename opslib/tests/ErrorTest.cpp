// ErrorTest.cpp - argument validation in XxxGetWorkspaceSize and aclnnLaunchExecutor: statuses and
// messages for NULL arguments, shapes, dtypes, alpha, formats and memory.
#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

using ErrorTest = OpsTest;

std::string Recent() { return aclnnGetRecentErrMsg(); }

aclnnStatus PrepareAdd(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                       aclTensor* out) {
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  const aclnnStatus status = aclnnAddGetWorkspaceSize(self, other, alpha, out, &ws, &executor);
  if (status == ACLNN_SUCCESS) aclDestroyAclOpExecutor(executor);
  else EXPECT_EQ(executor, nullptr);
  return status;
}

TEST_F(ErrorTest, NullArguments) {
  DeviceTensor a(ACL_FLOAT, {2, 3});
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  EXPECT_EQ(aclnnAddGetWorkspaceSize(nullptr, a.get(), nullptr, a.get(), &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnAdd: self is NULL");
  EXPECT_EQ(aclnnSubGetWorkspaceSize(a.get(), nullptr, nullptr, a.get(), &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnSub: other is NULL");
  EXPECT_EQ(aclnnMulGetWorkspaceSize(a.get(), a.get(), nullptr, &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnMul: out is NULL");
  EXPECT_EQ(aclnnDivGetWorkspaceSize(a.get(), a.get(), a.get(), nullptr, &executor), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnDiv: workspaceSize is NULL");
  EXPECT_EQ(aclnnReluGetWorkspaceSize(a.get(), a.get(), &ws, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnRelu: executor is NULL");
  EXPECT_EQ(aclnnCastGetWorkspaceSize(nullptr, a.get(), &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnCast: self is NULL");
}

TEST_F(ErrorTest, ShapesThatDoNotBroadcast) {
  DeviceTensor a(ACL_FLOAT, {2, 3});
  DeviceTensor b(ACL_FLOAT, {3});
  DeviceTensor out(ACL_FLOAT, {4, 3});
  EXPECT_EQ(PrepareAdd(a.get(), b.get(), nullptr, out.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: self shape [2, 3] cannot broadcast to out shape [4, 3]");
  DeviceTensor c(ACL_FLOAT, {1, 4, 3});  // more dims than out
  EXPECT_EQ(PrepareAdd(b.get(), c.get(), nullptr, out.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: other shape [1, 4, 3] cannot broadcast to out shape [4, 3]");
  DeviceTensor empty(ACL_FLOAT, {0, 3});  // a zero dim does not broadcast to 4
  EXPECT_EQ(PrepareAdd(empty.get(), b.get(), nullptr, out.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: self shape [0, 3] cannot broadcast to out shape [4, 3]");
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  EXPECT_EQ(aclnnExpGetWorkspaceSize(out.get(), a.get(), &ws, &executor), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnExp: self shape [4, 3] cannot broadcast to out shape [2, 3]");
}

TEST_F(ErrorTest, DtypesTheOpsDoNotAccept) {
  DeviceTensor f(ACL_FLOAT, {3});
  DeviceTensor i(ACL_INT64, {3});
  DeviceTensor b(ACL_BOOL, {3});
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  const std::pair<aclnnStatus, std::string> expectations[] = {
      {aclnnDivGetWorkspaceSize(i.get(), i.get(), i.get(), &ws, &ex),
       "aclnnDiv: out dtype INT64 is not supported: true division needs a floating out (FLOAT, "
       "FLOAT16, BF16, DOUBLE)"},
      {aclnnSubGetWorkspaceSize(b.get(), b.get(), nullptr, b.get(), &ws, &ex),
       "aclnnSub: subtraction with BOOL is not supported (self BOOL, other BOOL, out BOOL); use a "
       "logical op instead"},
      {aclnnAddGetWorkspaceSize(f.get(), i.get(), nullptr, i.get(), &ws, &ex),
       "aclnnAdd: the result of self FLOAT and other INT64 cannot be stored in out dtype INT64"},
      {aclnnMulGetWorkspaceSize(i.get(), b.get(), b.get(), &ws, &ex),
       "aclnnMul: the result of self INT64 and other BOOL cannot be stored in out dtype BOOL"},
      {aclnnExpGetWorkspaceSize(f.get(), i.get(), &ws, &ex),
       "aclnnExp: out dtype INT64 is not supported: the result is floating point (FLOAT, FLOAT16, "
       "BF16, DOUBLE)"},
      {aclnnSqrtGetWorkspaceSize(i.get(), b.get(), &ws, &ex),
       "aclnnSqrt: out dtype BOOL is not supported: the result is floating point (FLOAT, FLOAT16, "
       "BF16, DOUBLE)"},
      {aclnnReluGetWorkspaceSize(b.get(), b.get(), &ws, &ex), "aclnnRelu: self dtype BOOL is not supported"},
      {aclnnNegGetWorkspaceSize(b.get(), i.get(), &ws, &ex), "aclnnNeg: self dtype BOOL is not supported"},
      {aclnnAbsGetWorkspaceSize(b.get(), b.get(), &ws, &ex), "aclnnAbs: self dtype BOOL is not supported"},
      {aclnnReluGetWorkspaceSize(f.get(), i.get(), &ws, &ex),
       "aclnnRelu: the result of self FLOAT cannot be stored in out dtype INT64"},
  };
  for (const auto& [status, message] : expectations) {
    EXPECT_EQ(status, ACLNN_ERR_PARAM_INVALID) << message;
  }
  // Messages are per call; re-run each to compare its own message.
  EXPECT_EQ(aclnnDivGetWorkspaceSize(i.get(), i.get(), i.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[0].second);
  EXPECT_EQ(aclnnSubGetWorkspaceSize(b.get(), b.get(), nullptr, b.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[1].second);
  EXPECT_EQ(aclnnAddGetWorkspaceSize(f.get(), i.get(), nullptr, i.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[2].second);
  EXPECT_EQ(aclnnMulGetWorkspaceSize(i.get(), b.get(), b.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[3].second);
  EXPECT_EQ(aclnnExpGetWorkspaceSize(f.get(), i.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[4].second);
  EXPECT_EQ(aclnnSqrtGetWorkspaceSize(i.get(), b.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[5].second);
  EXPECT_EQ(aclnnReluGetWorkspaceSize(b.get(), b.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[6].second);
  EXPECT_EQ(aclnnReluGetWorkspaceSize(f.get(), i.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), expectations[9].second);
}

TEST_F(ErrorTest, UnsupportedDtypeAndFormat) {
  DeviceTensor f(ACL_FLOAT, {3});
  const int64_t dims[] = {3};
  aclTensor* undefined = aclCreateTensor(dims, 1, ACL_DT_UNDEFINED, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, f.data());
  ASSERT_NE(undefined, nullptr);
  EXPECT_EQ(PrepareAdd(f.get(), undefined, nullptr, f.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: other dtype UNDEFINED is not supported (FLOAT, FLOAT16, BF16, "
                      "DOUBLE, INT8, UINT8, INT16, INT32, INT64, BOOL)");
  aclDestroyTensor(undefined);
  // A private-format descriptor is well formed, but elementwise ops want plain layouts.
  const int64_t matrix[] = {1, 3};
  const int64_t nz_storage[] = {1, 1, 16, 16};
  aclTensor* fractal =
      aclCreateTensor(matrix, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_FRACTAL_NZ, nz_storage, 4, f.data());
  ASSERT_NE(fractal, nullptr) << Recent();
  EXPECT_EQ(PrepareAdd(f.get(), f.get(), nullptr, fractal), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: out format FRACTAL_NZ is not supported: elementwise ops compute on "
                      "plain formats (ND, NCHW, NHWC, NCDHW, NDHWC); convert it with aclnnTransData first");
  aclDestroyTensor(fractal);
}

TEST_F(ErrorTest, AlphaMustBeIntegralForIntegralOuts) {
  DeviceTensor i(ACL_INT32, {3});
  DeviceTensor f(ACL_FLOAT, {3});
  double fractional = 2.5;
  aclScalar* alpha = aclCreateScalar(&fractional, ACL_DOUBLE);
  EXPECT_EQ(PrepareAdd(i.get(), i.get(), alpha, i.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: alpha 2.5 is not an integer but out dtype INT32 is not floating point");
  EXPECT_EQ(PrepareAdd(f.get(), f.get(), alpha, f.get()), ACLNN_SUCCESS);
  aclDestroyScalar(alpha);
  double nan = std::nan("");
  alpha = aclCreateScalar(&nan, ACL_DOUBLE);
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_EQ(aclnnSubGetWorkspaceSize(i.get(), i.get(), alpha, i.get(), &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  aclDestroyScalar(alpha);
}

TEST_F(ErrorTest, MemoryMustBeDeviceMemoryInsideItsStorage) {
  std::vector<float> host(6);
  const int64_t dims[] = {2, 3};
  aclTensor* on_host = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, host.data());
  DeviceTensor out(ACL_FLOAT, {2, 3});
  EXPECT_EQ(PrepareAdd(on_host, out.get(), nullptr, out.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(Recent().find("aclnnAdd: self (shape [2, 3], strides [3, 1], offset 0, data "), std::string::npos) << Recent();
  EXPECT_NE(Recent().find("is not inside one device allocation"), std::string::npos) << Recent();
  aclDestroyTensor(on_host);

  // A view reaching past its storage shape.
  const int64_t storage[] = {5};
  aclTensor* too_big = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage, 1, out.data());
  EXPECT_EQ(PrepareAdd(out.get(), too_big, nullptr, out.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: other view (shape [2, 3], strides [3, 1], offset 0) reaches element 5 "
                      "but its storage [5] holds 5 elements");
  aclDestroyTensor(too_big);

  // A view reaching past the allocation itself (no storage shape given).
  aclTensor* overrun = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 4, ACL_FORMAT_ND, nullptr, 0, out.data());
  EXPECT_EQ(PrepareAdd(out.get(), out.get(), nullptr, overrun), ACLNN_ERR_PARAM_INVALID);
  aclDestroyTensor(overrun);

  // Negative strides reaching before the storage base.
  const int64_t back[] = {-1};
  const int64_t three[] = {3};
  aclTensor* before = aclCreateTensor(three, 1, ACL_FLOAT, back, 1, ACL_FORMAT_ND, nullptr, 0, out.data());
  uint64_t ws = 0;
  aclOpExecutor* ex = nullptr;
  EXPECT_EQ(aclnnNegGetWorkspaceSize(before, before, &ws, &ex), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnNeg: out view (shape [3], strides [-1], offset 1) reaches before the start of its storage");
  aclDestroyTensor(before);

  // Data missing for a non-empty tensor.
  aclTensor* no_data = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  EXPECT_EQ(PrepareAdd(out.get(), no_data, nullptr, out.get()), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnAdd: other has 6 elements but its data is NULL");
  aclDestroyTensor(no_data);
}

TEST_F(ErrorTest, NegativeStridesInsideTheStorageWork) {
  DeviceTensor x(ACL_FLOAT, {4}, {1, 2, 3, 4});
  const int64_t dims[] = {4};
  const int64_t back[] = {-1};
  aclTensor* reversed = aclCreateTensor(dims, 1, ACL_FLOAT, back, 3, ACL_FORMAT_ND, nullptr, 0, x.data());
  DeviceTensor out(ACL_FLOAT, {4});
  NOP_ASSERT_OK(RunOp([&](uint64_t* ws, aclOpExecutor** ex) {
    return aclnnSubGetWorkspaceSize(reversed, x.get(), nullptr, out.get(), ws, ex);
  }));
  EXPECT_EQ(out.Read(), (std::vector<double>{3, 1, -1, -3}));
  aclDestroyTensor(reversed);
}

TEST_F(ErrorTest, OperandsOnDifferentDevices) {
  DeviceTensor a(ACL_FLOAT, {3}, {1, 2, 3});
  NRT_ASSERT_OK(nrtSetDevice(1));
  DeviceTensor b(ACL_FLOAT, {3}, {1, 2, 3});
  NRT_ASSERT_OK(nrtSetDevice(0));
  EXPECT_EQ(PrepareAdd(a.get(), b.get(), nullptr, a.get()), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: other is on npu:1 but out is on npu:0");
}

TEST_F(ErrorTest, LaunchOnAStreamOfAnotherDevice) {
  DeviceTensor a(ACL_FLOAT, {3}, {1, 2, 3});
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(aclnnAddGetWorkspaceSize(a.get(), a.get(), nullptr, a.get(), &ws, &executor));
  NRT_ASSERT_OK(nrtSetDevice(1));
  EXPECT_EQ(aclnnAdd(nullptr, 0, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(Recent(), "aclnnAdd: the operands are in npu:0 memory but the stream belongs to npu:1");
  NRT_ASSERT_OK(nrtSetDevice(0));
}

TEST_F(ErrorTest, LaunchingNullTwiceOrDestroyed) {
  EXPECT_EQ(aclnnLaunchExecutor(nullptr, 0, nullptr, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(Recent(), "aclnnLaunchExecutor: executor is NULL");
  DeviceTensor a(ACL_FLOAT, {3}, {1, 2, 3});
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(aclnnReluGetWorkspaceSize(a.get(), a.get(), &ws, &executor));
  NOP_ASSERT_OK(aclnnRelu(nullptr, 0, executor, nullptr));
  NRT_ASSERT_OK(nrtStreamSynchronize(nullptr));
  EXPECT_EQ(aclnnRelu(nullptr, 0, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_NE(Recent().find("was already launched or destroyed"), std::string::npos) << Recent();

  NOP_ASSERT_OK(aclnnReluGetWorkspaceSize(a.get(), a.get(), &ws, &executor));
  NOP_EXPECT_OK(aclDestroyAclOpExecutor(executor));
  EXPECT_EQ(aclnnRelu(nullptr, 0, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(aclDestroyAclOpExecutor(executor), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(aclDestroyAclOpExecutor(nullptr), ACLNN_SUCCESS);
}

TEST_F(ErrorTest, LaunchOnADestroyedStreamIsARuntimeError) {
  DeviceTensor a(ACL_FLOAT, {3}, {1, 2, 3});
  nrtStream_t stream = nullptr;
  NRT_ASSERT_OK(nrtStreamCreate(&stream));
  NRT_ASSERT_OK(nrtStreamDestroy(stream));
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  NOP_ASSERT_OK(aclnnNegGetWorkspaceSize(a.get(), a.get(), &ws, &executor));
  EXPECT_EQ(aclnnNeg(nullptr, 0, executor, stream), ACLNN_ERR_RUNTIME_ERROR);
  EXPECT_NE(Recent().find("aclnnNeg: cannot launch on stream"), std::string::npos) << Recent();
  // The failed launch consumed the executor.
  EXPECT_EQ(aclnnNeg(nullptr, 0, executor, nullptr), ACLNN_ERR_PARAM_INVALID);
}

TEST_F(ErrorTest, SuccessfulCallsKeepTheRecentMessage) {
  DeviceTensor a(ACL_FLOAT, {3}, {1, 2, 3});
  uint64_t ws = 0;
  aclOpExecutor* executor = nullptr;
  EXPECT_EQ(aclnnAddGetWorkspaceSize(nullptr, a.get(), nullptr, a.get(), &ws, &executor), ACLNN_ERR_PARAM_NULLPTR);
  NOP_ASSERT_OK(RunOp([&](uint64_t* w, aclOpExecutor** ex) {
    return aclnnAddGetWorkspaceSize(a.get(), a.get(), nullptr, a.get(), w, ex);
  }));
  EXPECT_EQ(Recent(), "aclnnAdd: self is NULL");
}

}  // namespace
}  // namespace npu::opslib::testing

// DescriptorTest.cpp - tensor / scalar / int-array descriptors: copies, defaults, invalid input and
// the ACL-style accessors.
#include <memory>
#include <string>
#include <thread>

#include "OpsTestUtil.h"

namespace npu::opslib::testing {
namespace {

// Frees an accessor's new[] array.
struct ArrayDeleter {
  void operator()(int64_t* p) const { delete[] p; }
};
using OwnedArray = std::unique_ptr<int64_t[], ArrayDeleter>;

Shape ViewShape(const aclTensor* t) {
  int64_t* dims = nullptr;
  uint64_t n = 0;
  EXPECT_EQ(aclGetViewShape(t, &dims, &n), ACLNN_SUCCESS);
  OwnedArray owned(dims);
  return Shape(dims, dims + n);
}

Shape ViewStrides(const aclTensor* t) {
  int64_t* strides = nullptr;
  uint64_t n = 0;
  EXPECT_EQ(aclGetViewStrides(t, &strides, &n), ACLNN_SUCCESS);
  OwnedArray owned(strides);
  return Shape(strides, strides + n);
}

TEST(DescriptorTest, TensorCopiesTheCallersArrays) {
  std::vector<int64_t> dims = {2, 3, 4};
  std::vector<int64_t> strides = {1, 2, 6};
  std::vector<int64_t> storage = {30};
  int dummy = 0;
  aclTensor* t = aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT16, strides.data(), 5,
                                 ACL_FORMAT_NCHW, storage.data(), storage.size(), &dummy);
  ASSERT_NE(t, nullptr) << aclnnGetRecentErrMsg();
  // The caller's arrays may change or go away right after creation.
  dims.assign({9, 9, 9});
  strides.assign({9, 9, 9});
  storage.assign({9});
  EXPECT_EQ(ViewShape(t), (Shape{2, 3, 4}));
  EXPECT_EQ(ViewStrides(t), (Shape{1, 2, 6}));
  int64_t offset = -1;
  EXPECT_EQ(aclGetViewOffset(t, &offset), ACLNN_SUCCESS);
  EXPECT_EQ(offset, 5);
  aclDataType dtype = ACL_DT_UNDEFINED;
  EXPECT_EQ(aclGetDataType(t, &dtype), ACLNN_SUCCESS);
  EXPECT_EQ(dtype, ACL_FLOAT16);
  aclFormat format = ACL_FORMAT_UNDEFINED;
  EXPECT_EQ(aclGetFormat(t, &format), ACLNN_SUCCESS);
  EXPECT_EQ(format, ACL_FORMAT_NCHW);
  int64_t* storage_dims = nullptr;
  uint64_t storage_num = 0;
  EXPECT_EQ(aclGetStorageShape(t, &storage_dims, &storage_num), ACLNN_SUCCESS);
  OwnedArray owned(storage_dims);
  ASSERT_EQ(storage_num, 1u);
  EXPECT_EQ(storage_dims[0], 30);
  void* addr = nullptr;
  EXPECT_EQ(aclGetRawTensorAddr(t, &addr), ACLNN_SUCCESS);
  EXPECT_EQ(addr, &dummy);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
}

TEST(DescriptorTest, SetRawTensorAddrRebindsAndUnmarks) {
  const int64_t dims[] = {4};
  float first[4] = {};
  float second[4] = {};
  aclTensor* t = aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 1, first);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(aclMarkOutputTensor(t), ACLNN_SUCCESS);
  EXPECT_EQ(aclSetRawTensorAddr(t, second), ACLNN_SUCCESS);
  void* addr = nullptr;
  EXPECT_EQ(aclGetRawTensorAddr(t, &addr), ACLNN_SUCCESS);
  EXPECT_EQ(addr, second);
  EXPECT_EQ(aclIsOutputTensor(t), 0);
  EXPECT_EQ(aclSetRawTensorAddr(nullptr, second), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclDestroyTensor(t), ACLNN_SUCCESS);
}

TEST(DescriptorTest, NullStridesMeanContiguous) {
  const int64_t dims[] = {2, 0, 3};
  aclTensor* t = aclCreateTensor(dims, 3, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  ASSERT_NE(t, nullptr) << aclnnGetRecentErrMsg();
  EXPECT_EQ(ViewStrides(t), (Shape{3, 3, 1}));  // a zero dim still steps like a size-1 dim
  aclDestroyTensor(t);
}

TEST(DescriptorTest, ZeroDimTensorIsAScalar) {
  float value = 1.5f;
  aclTensor* t = aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, &value);
  ASSERT_NE(t, nullptr) << aclnnGetRecentErrMsg();
  EXPECT_EQ(ViewShape(t), Shape{});
  EXPECT_EQ(ViewStrides(t), Shape{});
  aclDestroyTensor(t);
}

TEST(DescriptorTest, InvalidTensorsAreRejectedWithAReason) {
  const int64_t dims[] = {2, -1};
  EXPECT_EQ(aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateTensor: negative size in viewDims [2, -1]");
  EXPECT_EQ(aclCreateTensor(nullptr, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateTensor: viewDims is NULL but viewDimsNum is 2");
  const int64_t ok[] = {2};
  EXPECT_EQ(aclCreateTensor(ok, 1, ACL_FLOAT, nullptr, -3, ACL_FORMAT_ND, nullptr, 0, nullptr), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateTensor: negative offset -3");
  EXPECT_EQ(aclCreateTensor(ok, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 1, nullptr), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateTensor: storageDims is NULL but storageDimsNum is 1");
}

TEST(DescriptorTest, TensorListOwnsItsTensorsAndAllowsNullEntries) {
  std::vector<int64_t> dims = {2, 3};
  int dummy = 0;
  const aclTensor* entries[3] = {
      aclCreateTensor(dims.data(), dims.size(), ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, &dummy),
      nullptr,  // an absent optional tensor
      aclCreateTensor(dims.data(), 1, ACL_INT64, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, &dummy)};
  aclTensorList* list = aclCreateTensorList(entries, 3);
  ASSERT_NE(list, nullptr) << aclnnGetRecentErrMsg();
  uint64_t size = 0;
  EXPECT_EQ(aclGetTensorListSize(list, &size), ACLNN_SUCCESS);
  EXPECT_EQ(size, 3u);
  EXPECT_EQ(aclDestroyTensorList(list), ACLNN_SUCCESS);  // frees the two tensors too (ASan checks)

  EXPECT_EQ(aclCreateTensorList(nullptr, 2), nullptr);
  EXPECT_NE(std::string(aclnnGetRecentErrMsg()).find("aclCreateTensorList"), std::string::npos);
  aclTensorList* empty = aclCreateTensorList(nullptr, 0);
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(aclGetTensorListSize(empty, nullptr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclDestroyTensorList(empty), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyTensorList(nullptr), ACLNN_SUCCESS);
}

TEST(DescriptorTest, DestroyingNullIsANoOp) {
  EXPECT_EQ(aclDestroyTensor(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyScalar(nullptr), ACLNN_SUCCESS);
  EXPECT_EQ(aclDestroyIntArray(nullptr), ACLNN_SUCCESS);
}

TEST(DescriptorTest, AccessorsRejectNull) {
  int64_t* dims = nullptr;
  uint64_t n = 0;
  EXPECT_EQ(aclGetViewShape(nullptr, &dims, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetViewStrides(nullptr, &dims, &n), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclGetStorageShape(nullptr, &dims, &n), ACLNN_ERR_PARAM_NULLPTR);
  int64_t offset = 0;
  EXPECT_EQ(aclGetViewOffset(nullptr, &offset), ACLNN_ERR_PARAM_NULLPTR);
  aclDataType dtype;
  EXPECT_EQ(aclGetDataType(nullptr, &dtype), ACLNN_ERR_PARAM_NULLPTR);
  void* addr = nullptr;
  EXPECT_EQ(aclGetRawTensorAddr(nullptr, &addr), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclGetRawTensorAddr: tensor or addr is NULL");
}

TEST(DescriptorTest, ScalarsReadOneElementOfTheirType) {
  // Neighbouring bytes must not be read: a 1-byte bool followed by garbage.
  unsigned char bool_bytes[8] = {7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  aclScalar* b = aclCreateScalar(bool_bytes, ACL_BOOL);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(aclDestroyScalar(b), ACLNN_SUCCESS);
  uint16_t half = RefFloatToHalf(0.5f);
  aclScalar* h = aclCreateScalar(&half, ACL_FLOAT16);
  ASSERT_NE(h, nullptr);
  aclDestroyScalar(h);
  int8_t small = -3;
  aclScalar* i = aclCreateScalar(&small, ACL_INT8);
  ASSERT_NE(i, nullptr);
  aclDestroyScalar(i);
}

TEST(DescriptorTest, InvalidScalarsAreRejected) {
  EXPECT_EQ(aclCreateScalar(nullptr, ACL_FLOAT), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateScalar: value is NULL");
  double v = 1;
  EXPECT_EQ(aclCreateScalar(&v, static_cast<aclDataType>(99)), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateScalar: unsupported data type 99");
}

TEST(DescriptorTest, IntArrays) {
  std::vector<int64_t> values = {1, 2, 3};
  aclIntArray* a = aclCreateIntArray(values.data(), values.size());
  ASSERT_NE(a, nullptr);
  values.clear();
  EXPECT_EQ(aclDestroyIntArray(a), ACLNN_SUCCESS);
  aclIntArray* empty = aclCreateIntArray(nullptr, 0);
  ASSERT_NE(empty, nullptr);
  aclDestroyIntArray(empty);
  EXPECT_EQ(aclCreateIntArray(nullptr, 2), nullptr);
  EXPECT_EQ(std::string(aclnnGetRecentErrMsg()), "aclCreateIntArray: value is NULL but size is 2");
}

TEST(DescriptorTest, RecentErrorIsPerThreadAndKeptBySuccessfulCalls) {
  EXPECT_EQ(aclCreateScalar(nullptr, ACL_FLOAT), nullptr);
  const std::string mine = aclnnGetRecentErrMsg();
  std::string theirs = "unset";
  std::thread([&] { theirs = aclnnGetRecentErrMsg(); }).join();
  EXPECT_EQ(theirs, "");
  const int64_t dims[] = {1};
  aclTensor* t = aclCreateTensor(dims, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, nullptr);
  ASSERT_NE(t, nullptr);
  aclDestroyTensor(t);
  EXPECT_EQ(aclnnGetRecentErrMsg(), mine);
}

}  // namespace
}  // namespace npu::opslib::testing

// symbol_package.cpp - an op package in Ascend's layout (libcust_opapi.so exporting the aclnn functions
// themselves, no registration entry point) for the registry tests. Built per vendor: VENDOR_VARIANT 1
// exports aclnnSymOp (out = self + 100), variant 2 its own aclnnSymOp (out = self + 200) and
// aclnnHalfOpGetWorkspaceSize without aclnnHalfOp, which the registry must ignore with a warning.
#include <cstdint>

#include "npu/opslib.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Job {
  const float* in;
  float* out;
  int64_t count;
};

bool Contiguous(const aclTensor* tensor, float** data, int64_t* count) {
  aclDataType dtype = ACL_DT_UNDEFINED;
  if (tensor == nullptr || aclGetDataType(tensor, &dtype) != ACLNN_SUCCESS || dtype != ACL_FLOAT) return false;
  int64_t* dims = nullptr;
  uint64_t ndim = 0;
  aclGetViewShape(tensor, &dims, &ndim);
  *count = 1;
  for (uint64_t i = 0; i < ndim; ++i) *count *= dims[i];
  delete[] dims;
  int64_t offset = 0;
  void* base = nullptr;
  aclGetViewOffset(tensor, &offset);
  aclGetRawTensorAddr(tensor, &base);
  *data = static_cast<float*>(base) + offset;
  return true;
}

int AddConstant(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  for (int64_t i = 0; i < job.count; ++i) job.out[i] = job.in[i] + 100.0f * VENDOR_VARIANT;
  return 0;
}

}  // namespace

EXPORT aclnnStatus aclnnSymOpGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                              aclOpExecutor** executor) {
  float* in = nullptr;
  float* data = nullptr;
  int64_t n = 0, m = 0;
  if (!Contiguous(self, &in, &n) || !Contiguous(out, &data, &m) || n != m) {
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, "aclnnSymOp: contiguous FLOAT tensors of one size only");
  }
  *executor = aclnnCreateExecutor("aclnnSymOp", &AddConstant, new Job{in, data, n},
                                  [](void* job) { delete static_cast<Job*>(job); });
  *workspace_size = 0;
  return ACLNN_SUCCESS;
}

EXPORT aclnnStatus aclnnSymOp(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, aclrtStream stream) {
  return aclnnLaunchExecutor(workspace, workspace_size, executor, stream);
}

#if VENDOR_VARIANT == 2
EXPORT aclnnStatus aclnnHalfOpGetWorkspaceSize(const aclTensor*, aclTensor*, uint64_t*, aclOpExecutor**) {
  return ACLNN_ERR_INNER;
}
#endif

// aclnn_mul_override.cpp - replaces the built-in aclnnMul: out = self * other + 1000, so that a test
// can tell the package's op from the built-in one. Contiguous FLOAT tensors of one size only.
#include "aclnn/aclnn_base.h"

namespace {

struct Job {
  const float* a;
  const float* b;
  float* out;
  int64_t count;
};

float* Data(const aclTensor* tensor, int64_t* count) {
  int64_t* dims = nullptr;
  uint64_t ndim = 0;
  int64_t offset = 0;
  void* base = nullptr;
  aclGetViewShape(tensor, &dims, &ndim);
  *count = 1;
  for (uint64_t i = 0; i < ndim; ++i) *count *= dims[i];
  delete[] dims;
  aclGetViewOffset(tensor, &offset);
  aclGetRawTensorAddr(tensor, &base);
  return static_cast<float*>(base) + offset;
}

int MulPlus1000(void* data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(data);
  for (int64_t i = 0; i < job.count; ++i) job.out[i] = job.a[i] * job.b[i] + 1000.0f;
  return 0;
}

}  // namespace

extern "C" aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  aclDataType types[3];
  aclGetDataType(self, &types[0]);
  aclGetDataType(other, &types[1]);
  aclGetDataType(out, &types[2]);
  int64_t n[3];
  Job job{Data(self, &n[0]), Data(other, &n[1]), Data(out, &n[2]), 0};
  if (types[0] != ACL_FLOAT || types[1] != ACL_FLOAT || types[2] != ACL_FLOAT || n[0] != n[2] || n[1] != n[2]) {
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, "aclnnMul (override package): same-size FLOAT only");
  }
  job.count = n[2];
  *executor = aclnnCreateExecutor("aclnnMul", &MulPlus1000, new Job(job), [](void* p) { delete static_cast<Job*>(p); });
  *workspaceSize = 0;
  return ACLNN_SUCCESS;
}

extern "C" aclnnStatus aclnnMul(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream) {
  return aclnnLaunchExecutor(workspace, workspaceSize, executor, stream);
}

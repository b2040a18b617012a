// custom_test_package.cpp - a custom op package for the registry tests, written against the public
// API only. Built twice: variant 1 overrides aclnnAdd (computing self - other) and adds aclnnMyOp
// (out = 2 * self + 1, failing on negative input) and aclnnMulAlias (the built-in Mul, looked up
// while registering); variant 2 adds its own aclnnMyOp (out = -self, which must lose to variant 1's)
// and aclnnOtherOp (a copy).
#include <cstdint>
#include <vector>

#include "npu/opslib.h"

#ifndef PACKAGE_VARIANT
#define PACKAGE_VARIANT 1
#endif

namespace {

// Enough for a test package: contiguous FLOAT operands.
struct View {
  float* data = nullptr;
  int64_t count = 0;
};

bool ContiguousFloat(const aclTensor* tensor, View* view) {
  aclDataType dtype = ACL_DT_UNDEFINED;
  if (tensor == nullptr || aclGetDataType(tensor, &dtype) != ACLNN_SUCCESS || dtype != ACL_FLOAT) {
    return false;
  }
  int64_t* dims = nullptr;
  uint64_t dim_count = 0;
  aclGetViewShape(tensor, &dims, &dim_count);
  view->count = 1;
  for (uint64_t i = 0; i < dim_count; ++i) view->count *= dims[i];
  delete[] dims;  // the accessor's array belongs to us
  int64_t offset = 0;
  aclGetViewOffset(tensor, &offset);
  void* base = nullptr;
  aclGetRawTensorAddr(tensor, &base);
  view->data = static_cast<float*>(base) + offset;
  return true;
}

struct Job {
  View a, b, out;
};

void DeleteJob(void* user_data) { delete static_cast<Job*>(user_data); }

aclnnStatus Launch(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, nrtStream_t stream) {
  return aclnnLaunchExecutor(workspace, workspace_size, executor, stream);
}

// Prepares a job over contiguous FLOAT operands and wraps `kernel` in an executor.
aclnnStatus Prepare(const char* name, const aclTensor* a, const aclTensor* b, aclTensor* out,
                    aclnnKernelFn kernel, uint64_t* workspace_size, aclOpExecutor** executor) {
  auto* job = new Job;
  if (!ContiguousFloat(a, &job->a) || (b != nullptr && !ContiguousFloat(b, &job->b)) ||
      !ContiguousFloat(out, &job->out)) {
    delete job;
    return ACLNN_ERR_PARAM_INVALID;
  }
  *executor = aclnnCreateExecutor(name, kernel, job, &DeleteJob);
  *workspace_size = 0;
  return *executor == nullptr ? ACLNN_ERR_INNER : ACLNN_SUCCESS;
}

#if PACKAGE_VARIANT == 1

int SubtractKernel(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  for (int64_t i = 0; i < job.out.count; ++i) job.out.data[i] = job.a.data[i] - job.b.data[i];
  return 0;
}

aclnnStatus CustomAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar*,
                                      aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  return Prepare("aclnnAdd", self, other, out, &SubtractKernel, workspace_size, executor);
}

int MyOpKernel(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  for (int64_t i = 0; i < job.out.count; ++i) {
    if (job.a.data[i] < 0) return 3;
    job.out.data[i] = 2 * job.a.data[i] + 1;
  }
  return 0;
}

aclnnStatus MyOpGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                 aclOpExecutor** executor) {
  return Prepare("aclnnMyOp", self, nullptr, out, &MyOpKernel, workspace_size, executor);
}

#else

int NegateKernel(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  for (int64_t i = 0; i < job.out.count; ++i) job.out.data[i] = -job.a.data[i];
  return 0;
}

aclnnStatus MyOpGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                 aclOpExecutor** executor) {
  return Prepare("aclnnMyOp", self, nullptr, out, &NegateKernel, workspace_size, executor);
}

int CopyKernel(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  for (int64_t i = 0; i < job.out.count; ++i) job.out.data[i] = job.a.data[i];
  return 0;
}

aclnnStatus OtherOpGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                    aclOpExecutor** executor) {
  return Prepare("aclnnOtherOp", self, nullptr, out, &CopyKernel, workspace_size, executor);
}

#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) void npu_opslib_register_package(
    aclnnRegisterOpFn register_op) {
#if PACKAGE_VARIANT == 1
  register_op("aclnnAdd", reinterpret_cast<void*>(&CustomAddGetWorkspaceSize), reinterpret_cast<void*>(&Launch));
  register_op("aclnnMyOp", reinterpret_cast<void*>(&MyOpGetWorkspaceSize), reinterpret_cast<void*>(&Launch));
  // Looking ops up while registering sees the built-ins.
  if (const aclnnOpEntry* mul = aclnnFindOp("aclnnMul")) {
    register_op("aclnnMulAlias", mul->get_workspace_size, mul->launch);
  }
  register_op("aclnnBroken", nullptr, nullptr);  // ignored with a warning
#else
  register_op("aclnnMyOp", reinterpret_cast<void*>(&MyOpGetWorkspaceSize), reinterpret_cast<void*>(&Launch));
  register_op("aclnnOtherOp", reinterpret_cast<void*>(&OtherOpGetWorkspaceSize), reinterpret_cast<void*>(&Launch));
#endif
}

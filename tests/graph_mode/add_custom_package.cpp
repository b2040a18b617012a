// add_custom_package.cpp - the AddCustom op of torch_npu's graph-mode sample as a custom op package:
// aclnnAddCustom(x, y, z) computes z = x + y for contiguous float16 or float32 tensors of one shape.
#include <cstdint>

#include "npu/opslib.h"

namespace {

struct Operand {
  void* data = nullptr;
  int64_t count = 0;
  aclDataType dtype = ACL_DT_UNDEFINED;
};

bool Read(const aclTensor* tensor, Operand* op) {
  if (tensor == nullptr || aclGetDataType(tensor, &op->dtype) != ACLNN_SUCCESS) return false;
  if (op->dtype != ACL_FLOAT && op->dtype != ACL_FLOAT16) return false;
  int64_t* dims = nullptr;
  uint64_t dim_count = 0;
  aclGetViewShape(tensor, &dims, &dim_count);
  op->count = 1;
  for (uint64_t i = 0; i < dim_count; ++i) op->count *= dims[i];
  delete[] dims;
  int64_t offset = 0;
  aclGetViewOffset(tensor, &offset);
  void* base = nullptr;
  aclGetRawTensorAddr(tensor, &base);
  op->data = static_cast<char*>(base) + offset * (op->dtype == ACL_FLOAT ? 4 : 2);
  return true;
}

struct Job {
  Operand x, y, z;
};

template <typename T>
void Add(const Job& job) {
  const T* x = static_cast<const T*>(job.x.data);
  const T* y = static_cast<const T*>(job.y.data);
  T* z = static_cast<T*>(job.z.data);
  for (int64_t i = 0; i < job.z.count; ++i) z[i] = static_cast<T>(static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

int AddKernel(void* user_data, void*, uint64_t) {
  const Job& job = *static_cast<Job*>(user_data);
  if (job.z.dtype == ACL_FLOAT) {
    Add<float>(job);
  } else {
    Add<_Float16>(job);
  }
  return 0;
}

aclnnStatus AddCustomGetWorkspaceSize(const aclTensor* x, const aclTensor* y, aclTensor* z,
                                      uint64_t* workspace_size, aclOpExecutor** executor) {
  auto* job = new Job;
  if (!Read(x, &job->x) || !Read(y, &job->y) || !Read(z, &job->z) || job->x.dtype != job->z.dtype ||
      job->y.dtype != job->z.dtype || job->x.count != job->z.count || job->y.count != job->z.count) {
    delete job;
    return ACLNN_ERR_PARAM_INVALID;
  }
  *executor = aclnnCreateExecutor("aclnnAddCustom", &AddKernel, job, [](void* p) { delete static_cast<Job*>(p); });
  *workspace_size = 0;
  return *executor == nullptr ? ACLNN_ERR_INNER : ACLNN_SUCCESS;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void npu_opslib_register_package(aclnnRegisterOpFn register_op) {
  register_op("aclnnAddCustom", reinterpret_cast<void*>(&AddCustomGetWorkspaceSize),
              reinterpret_cast<void*>(&aclnnLaunchExecutor));
}

// aclnn_add_custom.cpp - AddCustom written against the op library's C API: checks in phase one,
// the addition as an executor kernel that runs in stream order when phase two queues it.
#include "op_api/aclnn_add_custom.h"

#include <string>
#include <vector>

namespace {

struct Operand {
  void* data = nullptr;
  aclDataType dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> shape;
  int64_t numel = 1;
};

// Reads a descriptor; false (with the reason in *why) unless it is a contiguous view.
bool Read(const aclTensor* tensor, const char* name, Operand* op, std::string* why) {
  int64_t* dims = nullptr;
  int64_t* strides = nullptr;
  uint64_t ndim = 0, nstrides = 0;
  int64_t offset = 0;
  void* base = nullptr;
  aclGetDataType(tensor, &op->dtype);
  aclGetViewShape(tensor, &dims, &ndim);
  aclGetViewStrides(tensor, &strides, &nstrides);
  aclGetViewOffset(tensor, &offset);
  aclGetRawTensorAddr(tensor, &base);
  op->shape.assign(dims, dims + ndim);
  int64_t expected = 1;
  bool contiguous = true;
  for (uint64_t i = ndim; i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expected) contiguous = false;
    expected *= dims[i];
  }
  op->numel = expected;
  delete[] dims;  // the accessors' arrays belong to the caller
  delete[] strides;
  if (!contiguous) {
    *why = std::string(name) + " must be contiguous";
    return false;
  }
  const int64_t item = op->dtype == ACL_FLOAT16 ? 2 : 4;
  op->data = static_cast<char*>(base) + offset * item;
  return true;
}

struct AddJob {
  Operand x, y, out;
};

template <typename T, typename Compute>
void AddLoop(const AddJob& job) {
  const T* x = static_cast<const T*>(job.x.data);
  const T* y = static_cast<const T*>(job.y.data);
  T* out = static_cast<T*>(job.out.data);
  for (int64_t i = 0; i < job.out.numel; ++i) {
    out[i] = static_cast<T>(static_cast<Compute>(x[i]) + static_cast<Compute>(y[i]));
  }
}

int AddKernel(void* data, void* /*workspace*/, uint64_t /*workspace size*/) {
  const AddJob& job = *static_cast<AddJob*>(data);
  switch (job.out.dtype) {
    case ACL_FLOAT: AddLoop<float, float>(job); break;
    case ACL_FLOAT16: AddLoop<_Float16, float>(job); break;  // float math, one rounding, as PyTorch
    case ACL_INT32: AddLoop<int32_t, int32_t>(job); break;
    default: return 1;  // rejected in phase one
  }
  return 0;
}

}  // namespace

extern "C" aclnnStatus aclnnAddCustomGetWorkspaceSize(const aclTensor* x, const aclTensor* y, const aclTensor* out,
                                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (x == nullptr || y == nullptr || out == nullptr || workspaceSize == nullptr || executor == nullptr) {
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_NULLPTR, "aclnnAddCustom: NULL argument");
  }
  auto* job = new AddJob;
  std::string why;
  if (Read(x, "x", &job->x, &why) && Read(y, "y", &job->y, &why) && Read(out, "out", &job->out, &why)) {
    if (job->x.shape != job->y.shape || job->x.shape != job->out.shape) {
      why = "x, y and out must have the same shape";
    } else if (job->x.dtype != job->out.dtype || job->y.dtype != job->out.dtype) {
      why = "x, y and out must have the same dtype";
    } else if (job->out.dtype != ACL_FLOAT && job->out.dtype != ACL_FLOAT16 && job->out.dtype != ACL_INT32) {
      why = "supported dtypes are FLOAT, FLOAT16 and INT32";
    }
  }
  if (!why.empty()) {
    delete job;
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, ("aclnnAddCustom: " + why).c_str());
  }
  *executor = aclnnCreateExecutor("aclnnAddCustom", &AddKernel, job,
                                  [](void* data) { delete static_cast<AddJob*>(data); });
  *workspaceSize = 0;
  return *executor != nullptr ? ACLNN_SUCCESS : ACLNN_ERR_INNER;
}

extern "C" aclnnStatus aclnnAddCustom(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream) {
  return aclnnLaunchExecutor(workspace, workspaceSize, executor, stream);
}

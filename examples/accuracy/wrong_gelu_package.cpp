// wrong_gelu_package.cpp - a custom op package with a deliberately wrong aclnnGelu: its kernel
// drops erf's sign (0.5 * x * (1 + erf(|x| / sqrt(2)))), so it is exact for x >= 0 and wrong for
// x < 0. It overrides the built-in op of the same name; the accuracy walk-through
// (docs/accuracy.md) finds it. Contiguous float32 tensors use the wrong kernel, everything else
// the built-in one.
#include <cmath>
#include <cstdint>

#include "npu/opslib.h"

namespace {

using GeluPrepare = aclnnStatus (*)(const aclTensor*, int64_t, aclTensor*, uint64_t*, aclOpExecutor**);
GeluPrepare g_builtin_prepare = nullptr;

struct Job {
  const float* in;
  float* out;
  int64_t n;
};

int WrongGelu(void* data, void* /*workspace*/, uint64_t /*workspace size*/) {
  const Job* job = static_cast<const Job*>(data);
  for (int64_t i = 0; i < job->n; ++i) {
    const float x = job->in[i];
    job->out[i] = 0.5f * x * (1.0f + std::erf(std::fabs(x) * 0.70710678f));  // the bug: |x|
  }
  return 0;
}

// The first element and the element count of a contiguous float32 view; false otherwise.
bool ContiguousFloat(const aclTensor* t, float** first, int64_t* n) {
  aclDataType dtype;
  int64_t *dims = nullptr, *strides = nullptr;
  uint64_t ndim = 0, nstrides = 0;
  int64_t offset = 0;
  void* base = nullptr;
  if (aclGetDataType(t, &dtype) != ACLNN_SUCCESS || dtype != ACL_FLOAT) return false;
  aclGetViewShape(t, &dims, &ndim);
  aclGetViewStrides(t, &strides, &nstrides);
  aclGetViewOffset(t, &offset);
  aclGetRawTensorAddr(t, &base);
  bool contiguous = true;
  int64_t expected = 1;
  for (uint64_t d = ndim; d-- > 0;) {
    if (dims[d] != 1 && strides[d] != expected) contiguous = false;
    expected *= dims[d];
  }
  delete[] dims;
  delete[] strides;
  *first = static_cast<float*>(base) + offset;
  *n = expected;
  return contiguous;
}

aclnnStatus GeluGetWorkspaceSize(const aclTensor* self, int64_t approximate, aclTensor* out,
                                 uint64_t* workspace_size, aclOpExecutor** executor) {
  float *in = nullptr, *result = nullptr;
  int64_t n_in = 0, n_out = 0;
  if (self == nullptr || out == nullptr || workspace_size == nullptr || executor == nullptr ||
      approximate != 0 || !ContiguousFloat(self, &in, &n_in) || !ContiguousFloat(out, &result, &n_out) ||
      n_in != n_out) {
    return g_builtin_prepare(self, approximate, out, workspace_size, executor);
  }
  auto* job = new Job{in, result, n_in};
  *executor = aclnnCreateExecutor("aclnnGelu", &WrongGelu, job,
                                  [](void* data) { delete static_cast<Job*>(data); });
  if (*executor == nullptr) return ACLNN_ERR_INNER;
  if (aclnnOperandHooksActive()) {  // so that dumps and overflow detection see this op's tensors
    const aclTensor* inputs[] = {self};
    const aclTensor* outputs[] = {out};
    aclnnSetExecutorOperands(*executor, inputs, 1, outputs, 1);
  }
  *workspace_size = 0;
  return ACLNN_SUCCESS;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void npu_opslib_register_package(
    aclnnRegisterOpFn register_op) {
  const aclnnOpEntry* builtin = aclnnFindOp("aclnnGelu");
  if (builtin == nullptr) return;  // nothing to override
  g_builtin_prepare = reinterpret_cast<GeluPrepare>(builtin->get_workspace_size);
  register_op("aclnnGelu", reinterpret_cast<void*>(&GeluGetWorkspaceSize),
              reinterpret_cast<void*>(&aclnnLaunchExecutor));
}

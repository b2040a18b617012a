// FloatStatusKernelNpu.cpp - npu_alloc_float_status / npu_get_float_status / npu_clear_float_status:
// the overflow status register API. The software NPU computes in IEEE arithmetic and keeps no
// saturation counters, so the register reads zero; the ops keep scripts that use them running.
#include <ATen/ops/zeros.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {
constexpr int64_t kStatusWords = 8;  // torch_npu's status tensor: 8 float32 words

void checkMode(const char* op, int64_t mode) {
  TORCH_CHECK_VALUE(mode == 0 || mode == 1, op, ": mode must be 0 or 1, got ", mode);
}
}  // namespace

at::Tensor npu_alloc_float_status(const at::Tensor& self) {
  return at::zeros({kStatusWords}, self.options().dtype(at::kFloat));
}

at::Tensor npu_get_float_status(const at::Tensor& self, int64_t mode) {
  checkMode("npu_get_float_status", mode);
  return at::zeros({kStatusWords}, self.options().dtype(at::kFloat));
}

at::Tensor npu_clear_float_status(const at::Tensor& self, int64_t mode) {
  checkMode("npu_clear_float_status", mode);
  return at::zeros({kStatusWords}, self.options().dtype(at::kFloat));
}

}  // namespace at_npu::native

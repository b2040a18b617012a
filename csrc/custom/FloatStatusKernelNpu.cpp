// FloatStatusKernelNpu.cpp - npu_alloc_float_status / npu_get_float_status / npu_clear_float_status:
// the overflow status register of the software NPU (runtime nrt*OverflowStatus), read and cleared
// in stream order. Using any of them turns overflow detection on for the process.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/custom/NpuCustomFunctions.h"

namespace at_npu::native {
namespace {
constexpr int64_t kStatusWords = 8;  // torch_npu's status tensor: 8 float32 words

void checkMode(const char* op, int64_t mode) {
  TORCH_CHECK_VALUE(mode == 0 || mode == 1, op, ": mode must be 0 (original) or 1 (debug), got ",
                    mode);
}

void checkDevice(const char* op, const at::Tensor& self) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1, op,
              " reads the status of an npu device: pass an npu tensor, got one on ", self.device());
}

// A status buffer as npu_alloc_float_status makes it: first-generation scripts read the status
// from it rather than from the returned tensor.
bool isStatusBuffer(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat && t.numel() == kStatusWords && t.is_contiguous();
}

at::TensorOptions statusOptions(const at::Tensor& self) {
  return at::TensorOptions().dtype(at::kFloat).device(self.device());
}
}  // namespace

// These adapters are also the ops' Meta kernels (tracers, fake tensors): on a meta tensor they
// only describe the 8-word status tensor.

at::Tensor npu_alloc_float_status(const at::Tensor& self) {
  if (self.is_meta()) return at::empty({kStatusWords}, statusOptions(self));
  checkDevice("npu_alloc_float_status", self);
  NPU_CHECK(nrtSetOverflowDetection(1));
  return at::zeros({kStatusWords}, statusOptions(self));
}

at::Tensor npu_get_float_status(const at::Tensor& self, int64_t mode) {
  checkMode("npu_get_float_status", mode);
  if (self.is_meta()) return at::empty({kStatusWords}, statusOptions(self));
  checkDevice("npu_get_float_status", self);
  NPU_CHECK(nrtSetOverflowDetection(1));
  c10::DeviceGuard guard(self.device());
  const nrtStream_t stream = c10_npu::getCurrentNPUStream(self.device().index()).handle();
  at::Tensor status = at::empty({kStatusWords}, statusOptions(self));
  NPU_CHECK(nrtGetOverflowStatus(status.data_ptr(), kStatusWords * sizeof(float), stream));
  if (isStatusBuffer(self)) {
    NPU_CHECK(nrtGetOverflowStatus(self.data_ptr(), kStatusWords * sizeof(float), stream));
  }
  return status;
}

at::Tensor npu_clear_float_status(const at::Tensor& self, int64_t mode) {
  checkMode("npu_clear_float_status", mode);
  if (self.is_meta()) return at::empty({kStatusWords}, statusOptions(self));
  checkDevice("npu_clear_float_status", self);
  NPU_CHECK(nrtSetOverflowDetection(1));
  c10::DeviceGuard guard(self.device());
  NPU_CHECK(nrtResetOverflowStatus(c10_npu::getCurrentNPUStream(self.device().index()).handle()));
  if (isStatusBuffer(self)) self.zero_();
  return at::zeros({kStatusWords}, statusOptions(self));
}

}  // namespace at_npu::native

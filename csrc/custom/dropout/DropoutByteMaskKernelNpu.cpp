// DropoutByteMaskKernelNpu.cpp - dropout with a uint8 mask of one byte per element (1 = kept):
// _dropout_with_byte_mask, its backward and dropout_with_byte_mask, on aclnnDropoutGenMaskV3 / aclnnDropoutDoMaskV3.
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuCustomOps.h"
#include "csrc/custom/dropout/DropoutMask.h"
#include "csrc/framework/OpCommand.h"

#include <torch/library.h>

namespace at_npu::native {
namespace {

void checkByteMaskDropout(const char* op, const at::Tensor& self, double p) {
  TORCH_CHECK_VALUE(p >= 0 && p <= 1, op, ": dropout probability has to be between 0 and 1, but got ", p);
  TORCH_CHECK_TYPE(at::isFloatingType(self.scalar_type()), op, ": dropout only supports floating-point dtypes, got ",
                   self.scalar_type());
}

void checkByteMask(const char* op, const at::Tensor& grad, const at::Tensor& mask) {
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kByte, op, ": mask should be torch.uint8 dtype, got ", mask.scalar_type());
  TORCH_CHECK_VALUE(mask.sizes() == grad.sizes(), op, ": mask must have the shape of grad_output ", grad.sizes(),
                    " (one byte per element), got ", mask.sizes());
}

// out = x * mask / (1 - p); the same device op serves the forward and the backward.
at::Tensor applyByteMask(const at::Tensor& x, const at::Tensor& mask, double p) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  EXEC_NPU_CMD(aclnnDropoutDoMaskV3, x, mask, p, out);
  return out;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> _dropout_with_byte_mask(const at::Tensor& self, double p) {
  checkByteMaskDropout("_dropout_with_byte_mask", self, p);
  // Same npu generator stream as the bit-mask dropout, so manual_seed makes the mask reproducible.
  const auto [seed, offset] = nextDropoutSeed(self.device().index());
  at::Tensor mask = at::empty(self.sizes(), self.options().dtype(at::kByte));
  EXEC_NPU_CMD(aclnnDropoutGenMaskV3, self.sizes(), p, seed, offset, mask);
  return {applyByteMask(self, mask, p), mask};
}

std::tuple<at::Tensor, at::Tensor> _dropout_with_byte_mask_meta(const at::Tensor& self, double p) {
  checkByteMaskDropout("_dropout_with_byte_mask", self, p);
  return {at::empty(self.sizes(), self.options()), at::empty(self.sizes(), self.options().dtype(at::kByte))};
}

at::Tensor _dropout_with_byte_mask_backward(const at::Tensor& grad_output, const at::Tensor& mask, double p) {
  checkByteMaskDropout("_dropout_with_byte_mask_backward", grad_output, p);
  checkByteMask("_dropout_with_byte_mask_backward", grad_output, mask);
  return applyByteMask(grad_output, mask, p);
}

at::Tensor _dropout_with_byte_mask_backward_meta(const at::Tensor& grad_output, const at::Tensor& mask, double p) {
  checkByteMaskDropout("_dropout_with_byte_mask_backward", grad_output, p);
  checkByteMask("_dropout_with_byte_mask_backward", grad_output, mask);
  return at::empty(grad_output.sizes(), grad_output.options());
}

// torch_npu's shortcuts: nothing to drop returns a copy of self, p = 1 returns zeros; otherwise the masked op.
at::Tensor dropout_with_byte_mask(const at::Tensor& self, double p, bool train) {
  checkByteMaskDropout("dropout_with_byte_mask", self, p);
  if (p == 0 || !train || self.numel() == 0) {
    return self.clone();
  }
  if (p == 1) {
    return self * at::zeros_like(self);
  }
  return std::get<0>(at_npu::ops::_dropout_with_byte_mask(self, p));
}

at::Tensor dropout_with_byte_mask_meta(const at::Tensor& self, double p, bool train) {
  checkByteMaskDropout("dropout_with_byte_mask", self, p);
  return at::empty(self.sizes(), self.options());
}

namespace {

// dropout_with_byte_mask composes differentiable ops (as upstream composes it), so its autograd kernel is the same
// composition called with autograd on: the gradient is _dropout_with_byte_mask's.
TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m) {
  m.impl("dropout_with_byte_mask", [](const at::Tensor& self, double p, bool train) {
    return dropout_with_byte_mask(self, p, train);
  });
}

}  // namespace

}  // namespace at_npu::native

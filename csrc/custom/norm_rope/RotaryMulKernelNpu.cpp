// RotaryMulKernelNpu.cpp - npu_rotary_mul (x * r1 + rotate(x) * r2; rotary_mode "half" or
// "interleave", or rotate(x) = x @ rotate) and its backward on the aclnnRotaryPositionEmbedding(V2) /
// aclnnRotaryPositionEmbeddingGrad device ops.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

int64_t rotaryMode(const char* op, c10::string_view mode) {
  if (mode == "half") return 0;
  if (mode == "interleave") return 1;
  // RuntimeError with torch_npu's wording: its tests and callers match on it.
  TORCH_CHECK(false, "The rotary_mode of ", op, " should be half or interleave, but got ", mode);
}

void checkInputs(const char* op, const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2) {
  TORCH_CHECK_VALUE(self.dim() >= 1 && self.size(-1) % 2 == 0, op, ": the last dimension of x must be even, got ",
                    self.sizes());
  TORCH_CHECK_VALUE(r1.sizes() == r2.sizes(), op, ": r1 and r2 must have one shape, got ", r1.sizes(), " and ",
                    r2.sizes());
  TORCH_CHECK_VALUE(r1.dim() >= 1 && r1.dim() <= self.dim() && r1.size(-1) == self.size(-1), op, ": r1 / r2 ",
                    r1.sizes(), " must end in x's last dimension (x is ", self.sizes(), ")");
  for (int64_t d = 1; d <= r1.dim(); ++d) {
    TORCH_CHECK_VALUE(r1.size(-d) == 1 || r1.size(-d) == self.size(-d), op, ": r1 / r2 ", r1.sizes(),
                      " do not broadcast to x ", self.sizes());
  }
}

// Cos / sin of another dtype are cast to x's, as torch_npu does.
at::Tensor like(const at::Tensor& t, const at::Tensor& self) {
  return t.scalar_type() == self.scalar_type() ? t : t.to(self.scalar_type());
}

}  // namespace

at::Tensor npu_rotary_mul(const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2,
                          c10::string_view rotary_mode, const std::optional<at::Tensor>& rotate) {
  const int64_t mode = rotaryMode("npu_rotary_mul", rotary_mode);
  checkInputs("npu_rotary_mul", self, r1, r2);
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (rotate.has_value() && rotate->defined()) {
    EXEC_NPU_CMD(aclnnRotaryPositionEmbeddingV2, self, like(r1, self), like(r2, self), mode, like(*rotate, self),
                 out);
  } else {
    EXEC_NPU_CMD(aclnnRotaryPositionEmbedding, self, like(r1, self), like(r2, self), mode, out);
  }
  return out;
}

at::Tensor npu_rotary_mul_meta(const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2,
                               c10::string_view rotary_mode, const std::optional<at::Tensor>& rotate) {
  rotaryMode("npu_rotary_mul", rotary_mode);
  checkInputs("npu_rotary_mul", self, r1, r2);
  return at::empty(self.sizes(), self.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_rotary_mul_backward(const at::Tensor& grad, const at::Tensor& self,
                                                                        const at::Tensor& r1, const at::Tensor& r2,
                                                                        c10::string_view rotary_mode) {
  const int64_t mode = rotaryMode("npu_rotary_mul_backward", rotary_mode);
  checkInputs("npu_rotary_mul_backward", self, r1, r2);
  at::Tensor dx = at::empty(self.sizes(), self.options());
  at::Tensor dr1 = at::empty(r1.sizes(), r1.options()), dr2 = at::empty(r2.sizes(), r2.options());
  EXEC_NPU_CMD(aclnnRotaryPositionEmbeddingGrad, grad, r1, r2, self, mode, dx, dr1, dr2);
  return {dx, dr1, dr2};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_rotary_mul_backward_meta(
    const at::Tensor& grad, const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2,
    c10::string_view rotary_mode) {
  rotaryMode("npu_rotary_mul_backward", rotary_mode);
  checkInputs("npu_rotary_mul_backward", self, r1, r2);
  return {at::empty(self.sizes(), self.options()), at::empty(r1.sizes(), r1.options()),
          at::empty(r2.sizes(), r2.options())};
}

}  // namespace at_npu::native

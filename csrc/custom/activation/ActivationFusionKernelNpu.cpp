// ActivationFusionKernelNpu.cpp - fast_gelu (torch_npu.fast_gelu, the same FastGelu as npu_fast_gelu), npu_silu
// (+ npu_silu_backward), npu_gelu_mul (gelu of the last dimension's first half times its second half) and
// npu_clipped_swiglu (GPT-OSS's clamped SwiGLU with optional MoE token groups), on their aclnn device ops.
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkFloating(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be a floating-point tensor, got ",
                   t.scalar_type());
}

at::Tensor floatingLike(const char* op, const at::Tensor& self) {
  checkFloating(op, self, "self");
  return at::empty(self.sizes(), self.options());
}

std::string geluMode(c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                    "npu_gelu_mul: approximate must be 'none' (erf) or 'tanh', got '", approximate, "'");
  return std::string(approximate);
}

// input [..., 2d] -> [..., d].
at::Tensor geluMulOutput(const at::Tensor& input) {
  const char* op = "npu_gelu_mul";
  checkFloating(op, input, "input");
  TORCH_CHECK_VALUE(input.dim() >= 1 && input.size(-1) % 2 == 0, op,
                    ": the last dimension must split into two equal halves, got shape ", input.sizes());
  std::vector<int64_t> shape = input.sizes().vec();
  shape.back() /= 2;
  return at::empty(shape, input.options());
}

// x with dimension `dim` halved.
at::Tensor clippedSwigluOutput(const at::Tensor& x, const std::optional<at::Tensor>& group_index, int64_t dim) {
  const char* op = "npu_clipped_swiglu";
  checkFloating(op, x, "x");
  TORCH_CHECK_VALUE(x.dim() >= 2, op, ": x must have at least 2 dimensions, got ", x.sizes());
  TORCH_CHECK_VALUE(dim >= -x.dim() && dim < x.dim(), op, ": dim ", dim, " is out of range for ", x.dim(), "-D x");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  TORCH_CHECK_VALUE(x.size(d) % 2 == 0, op, ": dimension ", dim, " (size ", x.size(d), ") must be even");
  if (group_index.has_value() && group_index->defined()) {
    TORCH_CHECK_VALUE(group_index->dim() == 1, op, ": group_index must be 1-D (tokens per group), got ",
                      group_index->sizes());
    TORCH_CHECK_TYPE(group_index->scalar_type() == at::kLong || group_index->scalar_type() == at::kInt, op,
                     ": group_index must be int64 (or int32), got ", group_index->scalar_type());
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape[d] /= 2;
  return at::empty(shape, x.options());
}

}  // namespace

at::Tensor fast_gelu(const at::Tensor& self) {
  at::Tensor out = floatingLike("fast_gelu", self);
  EXEC_NPU_CMD(aclnnFastGelu, self, out);
  return out;
}

at::Tensor fast_gelu_meta(const at::Tensor& self) { return floatingLike("fast_gelu", self); }

at::Tensor npu_silu(const at::Tensor& self) {
  at::Tensor out = floatingLike("npu_silu", self);
  EXEC_NPU_CMD(aclnnSilu, self, out);
  return out;
}

at::Tensor npu_silu_meta(const at::Tensor& self) { return floatingLike("npu_silu", self); }

// x0 is the forward's input, x1 its output (torch_npu passes both; the gradient needs only x0).
at::Tensor npu_silu_backward(const at::Tensor& grad_output, const at::Tensor& x0, const at::Tensor& x1) {
  TORCH_CHECK_VALUE(grad_output.sizes().equals(x0.sizes()) && x1.sizes().equals(x0.sizes()),
                    "npu_silu_backward: grad_output, x0 and x1 must have one shape, got ", grad_output.sizes(), ", ",
                    x0.sizes(), " and ", x1.sizes());
  at::Tensor grad_input = floatingLike("npu_silu_backward", x0);
  EXEC_NPU_CMD(aclnnSiluBackward, grad_output, x0, grad_input);
  return grad_input;
}

at::Tensor npu_silu_backward_meta(const at::Tensor& grad_output, const at::Tensor& x0, const at::Tensor& x1) {
  return floatingLike("npu_silu_backward", x0);
}

at::Tensor npu_gelu_mul(const at::Tensor& input, c10::string_view approximate) {
  const std::string mode = geluMode(approximate);
  at::Tensor out = geluMulOutput(input);
  EXEC_NPU_CMD(aclnnGeluMul, input, mode, out);
  return out;
}

at::Tensor npu_gelu_mul_meta(const at::Tensor& input, c10::string_view approximate) {
  geluMode(approximate);
  return geluMulOutput(input);
}

at::Tensor npu_clipped_swiglu(const at::Tensor& x, const std::optional<at::Tensor>& group_index, int64_t dim,
                              double alpha, double limit, double bias, bool interleaved) {
  at::Tensor out = clippedSwigluOutput(x, group_index, dim);
  EXEC_NPU_CMD(aclnnClippedSwiglu, x, group_index, dim, alpha, limit, bias, interleaved, out);
  return out;
}

at::Tensor npu_clipped_swiglu_meta(const at::Tensor& x, const std::optional<at::Tensor>& group_index, int64_t dim,
                                   double alpha, double limit, double bias, bool interleaved) {
  return clippedSwigluOutput(x, group_index, dim);
}

}  // namespace at_npu::native

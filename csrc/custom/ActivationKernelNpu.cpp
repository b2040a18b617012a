// ActivationKernelNpu.cpp - npu_rms_norm, npu_rotary_mul, npu_swiglu, npu_fast_gelu, npu_mish and their
// backward kernels, composed of ATen ops (which run on the npu and, on meta tensors, as Meta kernels).
#include <ATen/ops/cat.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mish.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

// The trailing dimensions gamma normalises over.
std::vector<int64_t> normDims(const at::Tensor& self, const at::Tensor& gamma) {
  TORCH_CHECK_VALUE(gamma.dim() >= 1 && gamma.dim() <= self.dim() &&
                        self.sizes().slice(self.dim() - gamma.dim()).equals(gamma.sizes()),
                    "npu_rms_norm: gamma's shape ", gamma.sizes(), " must equal the trailing dimensions of x ",
                    self.sizes());
  std::vector<int64_t> dims;
  for (int64_t d = self.dim() - gamma.dim(); d < self.dim(); ++d) dims.push_back(d);
  return dims;
}

// rotate(x): "half" -> cat(-x2, x1) of the two halves of the last dim; "interleave" -> pairs (-x_odd, x_even).
at::Tensor rotate(const at::Tensor& x, c10::string_view mode, bool transposed) {
  const int64_t d = x.size(-1);
  TORCH_CHECK_VALUE(d % 2 == 0, "npu_rotary_mul: the last dimension must be even, got ", d);
  if (mode == "half") {
    at::Tensor a = x.narrow(-1, 0, d / 2), b = x.narrow(-1, d / 2, d / 2);
    return transposed ? at::cat({b, -a}, -1) : at::cat({-b, a}, -1);
  }
  TORCH_CHECK_VALUE(mode == "interleave", "npu_rotary_mul: rotary_mode must be 'half' or 'interleave', got '",
                    mode, "'");
  auto pairs = x.unflatten(-1, {d / 2, 2});
  at::Tensor even = pairs.select(-1, 0), odd = pairs.select(-1, 1);
  return (transposed ? at::stack({odd, -even}, -1) : at::stack({-odd, even}, -1)).flatten(-2);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_rms_norm(const at::Tensor& self, const at::Tensor& gamma, double epsilon) {
  auto dims = normDims(self, gamma);
  at::Tensor x = self.to(at::kFloat);
  at::Tensor rstd = at::rsqrt(at::mean(x * x, dims, /*keepdim=*/true) + epsilon);
  at::Tensor y = (x * rstd * gamma.to(at::kFloat)).to(self.scalar_type());
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_backward(const at::Tensor& dy, const at::Tensor& self,
                                                         const at::Tensor& gamma, const at::Tensor& rstd) {
  auto dims = normDims(self, gamma);
  at::Tensor x = self.to(at::kFloat), g = dy.to(at::kFloat);
  at::Tensor xhat = x * rstd;
  std::vector<int64_t> lead;
  for (int64_t d = 0; d < self.dim() - gamma.dim(); ++d) lead.push_back(d);
  at::Tensor dgamma = lead.empty() ? g * xhat : at::sum(g * xhat, lead);
  at::Tensor dxhat = g * gamma.to(at::kFloat);
  at::Tensor dx = rstd * (dxhat - xhat * at::mean(dxhat * xhat, dims, /*keepdim=*/true));
  return {dx.to(self.scalar_type()), dgamma.to(gamma.scalar_type())};
}

at::Tensor npu_rotary_mul(const at::Tensor& self, const at::Tensor& r1, const at::Tensor& r2,
                          c10::string_view rotary_mode) {
  return self * r1 + rotate(self, rotary_mode, false) * r2;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_rotary_mul_backward(const at::Tensor& grad, const at::Tensor& self,
                                                                        const at::Tensor& r1, const at::Tensor& r2,
                                                                        c10::string_view rotary_mode) {
  at::Tensor dx = grad * r1 + rotate(grad * r2, rotary_mode, true);
  at::Tensor dr1 = (grad * self).sum_to_size(r1.sizes());
  at::Tensor dr2 = (grad * rotate(self, rotary_mode, false)).sum_to_size(r2.sizes());
  return {dx.expand(self.sizes()).contiguous(), dr1, dr2};
}

at::Tensor npu_swiglu(const at::Tensor& self, int64_t dim) {
  auto halves = self.chunk(2, dim);
  TORCH_CHECK_VALUE(self.size(dim) % 2 == 0, "npu_swiglu: dimension ", dim, " (size ", self.size(dim),
                    ") must split into two equal halves");
  return at::silu(halves[0]) * halves[1];
}

at::Tensor npu_swiglu_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  auto halves = self.chunk(2, dim);
  const at::Tensor &a = halves[0], &b = halves[1];
  at::Tensor s = at::sigmoid(a);
  at::Tensor da = grad_output * b * s * (1 + a * (1 - s));
  at::Tensor db = grad_output * a * s;
  return at::cat({da, db}, dim);
}

at::Tensor npu_fast_gelu(const at::Tensor& self) {
  // x / (1 + exp(-1.702 |x|)) * exp(0.851 x (x - |x|)) == x * sigmoid(1.702 x).
  return self * at::sigmoid(self * 1.702);
}

at::Tensor npu_fast_gelu_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor s = at::sigmoid(self * 1.702);
  return grad * (s + self * 1.702 * s * (1 - s));
}

at::Tensor npu_mish(const at::Tensor& self) { return at::mish(self); }

}  // namespace at_npu::native

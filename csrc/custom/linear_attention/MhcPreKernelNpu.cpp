// MhcPreKernelNpu.cpp - npu_mhc_pre (the mHC pre-projection: RmsNorm'd x times phi into the H_pre / H_post / H_res
// maps, and h_in = sum_n H_pre[n] x[n]) and its backward, on aclnnMhcPreV2 / aclnnMhcPreBackward.
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using PreOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using PreGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// The leading (token) dims of x: (T) or (B, S).
std::vector<int64_t> tokenDims(const at::Tensor& x) {
  return std::vector<int64_t>(x.sizes().begin(), x.sizes().end() - 2);
}

std::vector<int64_t> withTail(std::vector<int64_t> dims, std::initializer_list<int64_t> tail) {
  dims.insert(dims.end(), tail.begin(), tail.end());
  return dims;
}

void checkPre(const char* op, const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha,
              const std::optional<at::Tensor>& gamma) {
  TORCH_CHECK_VALUE(x.dim() == 3 || x.dim() == 4, op, ": x must be (T, n, D) or (B, S, n, D), got ", x.sizes());
  TORCH_CHECK_VALUE(x.numel() > 0, op, ": x must not be empty");
  TORCH_CHECK_TYPE(x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf || x.scalar_type() == at::kFloat,
                   op, ": x must be bfloat16 or float16 (or float32), got ", x.scalar_type());
  const int64_t n = x.size(-2), d = x.size(-1);
  TORCH_CHECK_VALUE(alpha.numel() == 3 || alpha.numel() == 2, op, ": alpha must hold 3 values (pre, post, res) or 2 "
                    "(pre, post), got ", alpha.numel());
  const int64_t k = alpha.numel() == 3 ? n * n + 2 * n : 2 * n;
  TORCH_CHECK_TYPE(phi.scalar_type() == at::kFloat && alpha.scalar_type() == at::kFloat, op,
                   ": phi and alpha must be float32");
  TORCH_CHECK_VALUE(phi.dim() == 2 && phi.size(0) == k && phi.size(1) == n * d, op, ": phi must be (", k, ", ", n * d,
                    ") for n = ", n, ", D = ", d, " and ", alpha.numel(), " alpha values, got ", phi.sizes());
  if (present(gamma)) {
    TORCH_CHECK_TYPE(gamma->scalar_type() == at::kFloat, op, ": gamma must be float32, got ", gamma->scalar_type());
    TORCH_CHECK_VALUE(gamma->numel() == n * d, op, ": gamma must be (", n, ", ", d, "), got ", gamma->sizes());
  }
}

PreOutputs preOutputs(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& bias, const at::Tensor& alpha,
                      int64_t out_flag) {
  const char* op = "npu_mhc_pre";
  TORCH_CHECK_TYPE(bias.scalar_type() == at::kFloat, op, ": bias must be float32, got ", bias.scalar_type());
  TORCH_CHECK_VALUE(bias.numel() == phi.size(0), op, ": bias must hold ", phi.size(0), " values, got ", bias.sizes());
  TORCH_CHECK_VALUE(out_flag == 0 || out_flag == 1, op, ": out_flag must be 0 or 1, got ", out_flag);
  const std::vector<int64_t> t = tokenDims(x);
  const int64_t n = x.size(-2), d = x.size(-1);
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  at::Tensor h_in = at::empty(withTail(t, {d}), x.options());
  at::Tensor h_post = at::empty(withTail(t, {n}), f32);
  // Without alpha_res there is no H_res: a (1,) zero, as torch_npu.
  at::Tensor h_res = alpha.numel() == 3 ? at::empty(withTail(t, {n, n}), f32) : at::empty({1}, f32);
  at::Tensor inv_rms, h_mix, h_pre;  // undefined (None) unless out_flag = 1
  if (out_flag == 1) {
    inv_rms = at::empty(t, f32);
    h_mix = at::empty(withTail(t, {phi.size(0)}), f32);
    h_pre = at::empty(withTail(t, {n}), f32);
  }
  return {h_in, h_post, h_res, inv_rms, h_mix, h_pre};
}

std::optional<at::Tensor> optionalOf(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

PreGrads preGrads(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha, const at::Tensor& grad_h_in,
                  const at::Tensor& inv_rms, const at::Tensor& h_mix, const at::Tensor& h_pre,
                  const at::Tensor& h_post, const std::optional<at::Tensor>& gamma) {
  const char* op = "npu_mhc_pre_backward";
  checkPre(op, x, phi, alpha, gamma);
  TORCH_CHECK_VALUE(inv_rms.defined() && h_mix.defined() && h_pre.defined(), op,
                    ": inv_rms, h_mix and h_pre are missing: run npu_mhc_pre with out_flag=1 to train through it");
  const std::vector<int64_t> t = tokenDims(x);
  int64_t tokens = 1;
  for (int64_t v : t) tokens *= v;
  const int64_t n = x.size(-2), d = x.size(-1);
  TORCH_CHECK_VALUE(!grad_h_in.defined() || grad_h_in.numel() == tokens * d, op, ": grad_h_in must be x's tokens "
                    "by D");
  TORCH_CHECK_VALUE(inv_rms.numel() == tokens && h_mix.numel() == tokens * phi.size(0) && h_pre.numel() == tokens * n &&
                        h_post.numel() == tokens * n,
                    op, ": inv_rms, h_mix, h_pre and h_post must be npu_mhc_pre's outputs for this x");
  const at::TensorOptions f32 = x.options().dtype(at::kFloat);
  return {at::empty(x.sizes(), x.options()), at::empty(phi.sizes(), f32), at::empty({alpha.numel()}, f32),
          at::empty({phi.size(0)}, f32), at::empty({n, d}, f32)};
}

}  // namespace

PreOutputs npu_mhc_pre(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha, const at::Tensor& bias,
                       const std::optional<at::Tensor>& gamma, double norm_eps, double hc_eps, int64_t out_flag,
                       int64_t inner_precise) {
  checkPre("npu_mhc_pre", x, phi, alpha, gamma);
  TORCH_CHECK_VALUE(inner_precise == 0 || inner_precise == 1, "npu_mhc_pre: inner_precise must be 0 (FP32) or 1 "
                    "(HF32), got ", inner_precise);
  PreOutputs outs = preOutputs(x, phi, bias, alpha, out_flag);
  auto& [h_in, h_post, h_res, inv_rms, h_mix, h_pre] = outs;
  const std::optional<at::Tensor> inv = optionalOf(inv_rms), mix = optionalOf(h_mix), pre = optionalOf(h_pre);
  EXEC_NPU_CMD(aclnnMhcPreV2, x, phi, alpha, bias, gamma, norm_eps, hc_eps, inner_precise, h_in, h_post, h_res, inv,
               mix, pre);
  return outs;
}

PreOutputs npu_mhc_pre_meta(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha,
                            const at::Tensor& bias, const std::optional<at::Tensor>& gamma, double norm_eps,
                            double hc_eps, int64_t out_flag, int64_t inner_precise) {
  checkPre("npu_mhc_pre", x, phi, alpha, gamma);
  TORCH_CHECK_VALUE(inner_precise == 0 || inner_precise == 1, "npu_mhc_pre: inner_precise must be 0 (FP32) or 1 "
                    "(HF32), got ", inner_precise);
  return preOutputs(x, phi, bias, alpha, out_flag);
}

PreGrads npu_mhc_pre_backward(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha,
                              const at::Tensor& grad_h_in, const at::Tensor& grad_h_post,
                              const at::Tensor& grad_h_res, const at::Tensor& inv_rms, const at::Tensor& h_mix,
                              const at::Tensor& h_pre, const at::Tensor& h_post, const std::optional<at::Tensor>& gamma,
                              double hc_eps, const std::optional<at::Tensor>& grad_x_post) {
  PreGrads grads = preGrads(x, phi, alpha, grad_h_in, inv_rms, h_mix, h_pre, h_post, gamma);
  auto& [x_grad, phi_grad, alpha_grad, bias_grad, gamma_grad] = grads;
  // Outputs nobody used arrive without a gradient: the device op reads them as zeros.
  const std::optional<at::Tensor> g_in = optionalOf(grad_h_in), g_post = optionalOf(grad_h_post),
                                  g_res = optionalOf(grad_h_res);
  const float eps = static_cast<float>(hc_eps);
  EXEC_NPU_CMD(aclnnMhcPreBackward, x, phi, alpha, g_in, g_post, g_res, inv_rms, h_mix, h_pre, h_post, gamma,
               grad_x_post, eps, x_grad, phi_grad, alpha_grad, bias_grad, gamma_grad);
  return grads;
}

PreGrads npu_mhc_pre_backward_meta(const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha,
                                   const at::Tensor& grad_h_in, const at::Tensor& grad_h_post,
                                   const at::Tensor& grad_h_res, const at::Tensor& inv_rms, const at::Tensor& h_mix,
                                   const at::Tensor& h_pre, const at::Tensor& h_post,
                                   const std::optional<at::Tensor>& gamma, double hc_eps,
                                   const std::optional<at::Tensor>& grad_x_post) {
  return preGrads(x, phi, alpha, grad_h_in, inv_rms, h_mix, h_pre, h_post, gamma);
}

}  // namespace at_npu::native

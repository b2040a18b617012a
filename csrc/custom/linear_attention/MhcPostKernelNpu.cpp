// MhcPostKernelNpu.cpp - npu_mhc_post (mHC output mixing: y = h_res^T x + h_post (x) h_out per token) and its
// backward, on aclnnMhcPost / aclnnMhcPostBackward.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using MhcPostGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// x [T, n, D] or [B, S, n, D]; h_out [..., D] in x's dtype; h_post [..., n] and h_res [..., n, n] in float32.
void checkMhcPost(const char* op, const at::Tensor& x, const std::optional<at::Tensor>& h_res,
                  const at::Tensor& h_out, const at::Tensor& h_post) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat,
                   op, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK_TYPE(h_out.scalar_type() == x.scalar_type(), op, ": h_out must have x's dtype ", x.scalar_type(),
                   ", got ", h_out.scalar_type());
  TORCH_CHECK_TYPE(h_post.scalar_type() == at::kFloat && (!h_res.has_value() || h_res->scalar_type() == at::kFloat),
                   op, ": h_post and h_res must be float32");
  TORCH_CHECK_VALUE((x.dim() == 3 || x.dim() == 4) && x.numel() > 0, op,
                    ": x must be a non-empty [T, n, D] or [B, S, n, D], got ", x.sizes());
  std::vector<int64_t> out_shape = x.sizes().vec();
  out_shape.erase(out_shape.end() - 2);  // [..., D]
  std::vector<int64_t> post_shape(x.sizes().begin(), x.sizes().end() - 1);  // [..., n]
  std::vector<int64_t> res_shape = x.sizes().vec();
  res_shape.back() = x.size(-2);  // [..., n, n]
  TORCH_CHECK_VALUE(h_out.sizes() == c10::IntArrayRef(out_shape), op, ": h_out must be ",
                    c10::IntArrayRef(out_shape), ", got ", h_out.sizes());
  TORCH_CHECK_VALUE(h_post.sizes() == c10::IntArrayRef(post_shape), op, ": h_post must be ",
                    c10::IntArrayRef(post_shape), ", got ", h_post.sizes());
  TORCH_CHECK_VALUE(!h_res.has_value() || h_res->sizes() == c10::IntArrayRef(res_shape), op, ": h_res must be ",
                    c10::IntArrayRef(res_shape), ", got ", h_res.has_value() ? h_res->sizes() : c10::IntArrayRef());
}

MhcPostGrads emptyMhcPostGrads(const at::Tensor& x, const at::Tensor& h_out, const at::Tensor& h_post) {
  std::vector<int64_t> res_shape = x.sizes().vec();
  res_shape.back() = x.size(-2);
  // The h_res gradient is returned even without h_res, as torch_npu does.
  return {at::empty(x.sizes(), x.options()), at::empty(res_shape, x.options().dtype(at::kFloat)),
          at::empty(h_out.sizes(), h_out.options()), at::empty(h_post.sizes(), h_post.options())};
}

}  // namespace

at::Tensor npu_mhc_post(const at::Tensor& x, const std::optional<at::Tensor>& h_res, const at::Tensor& h_out,
                        const at::Tensor& h_post) {
  checkMhcPost("npu_mhc_post", x, h_res, h_out, h_post);
  at::Tensor y = at::empty(x.sizes(), x.options());
  EXEC_NPU_CMD(aclnnMhcPost, x, h_res, h_out, h_post, y);
  return y;
}

at::Tensor npu_mhc_post_meta(const at::Tensor& x, const std::optional<at::Tensor>& h_res, const at::Tensor& h_out,
                             const at::Tensor& h_post) {
  checkMhcPost("npu_mhc_post", x, h_res, h_out, h_post);
  return at::empty(x.sizes(), x.options());
}

MhcPostGrads npu_mhc_post_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                   const std::optional<at::Tensor>& h_res, const at::Tensor& h_out,
                                   const at::Tensor& h_post) {
  checkMhcPost("npu_mhc_post_backward", x, h_res, h_out, h_post);
  TORCH_CHECK_VALUE(grad_y.sizes() == x.sizes() && grad_y.scalar_type() == x.scalar_type(),
                    "npu_mhc_post_backward: grad_y must match x (", x.sizes(), ", ", x.scalar_type(), "), got ",
                    grad_y.sizes(), ", ", grad_y.scalar_type());
  auto grads = emptyMhcPostGrads(x, h_out, h_post);
  auto& [grad_x, grad_h_res, grad_h_out, grad_h_post] = grads;
  EXEC_NPU_CMD(aclnnMhcPostBackward, grad_y, x, h_res, h_out, h_post, grad_x, grad_h_res, grad_h_out, grad_h_post);
  return grads;
}

MhcPostGrads npu_mhc_post_backward_meta(const at::Tensor& grad_y, const at::Tensor& x,
                                        const std::optional<at::Tensor>& h_res, const at::Tensor& h_out,
                                        const at::Tensor& h_post) {
  checkMhcPost("npu_mhc_post_backward", x, h_res, h_out, h_post);
  TORCH_CHECK_VALUE(grad_y.sizes() == x.sizes() && grad_y.scalar_type() == x.scalar_type(),
                    "npu_mhc_post_backward: grad_y must match x (", x.sizes(), ", ", x.scalar_type(), "), got ",
                    grad_y.sizes(), ", ", grad_y.scalar_type());
  return emptyMhcPostGrads(x, h_out, h_post);
}

}  // namespace at_npu::native

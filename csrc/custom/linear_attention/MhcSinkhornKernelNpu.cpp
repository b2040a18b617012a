// MhcSinkhornKernelNpu.cpp - npu_mhc_sinkhorn (softmax then alternating column / row normalisation of the mHC
// residual matrices) and its backward, on aclnnMhcSinkhorn / aclnnMhcSinkhornBackward.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using SinkhornOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// The saved steps use torch_npu's buffer sizes: each of the 2 * num_iters steps keeps, per matrix, n rows padded
// to 8 values (norm_out) and one padded 8-value sum vector (sum_out).
constexpr int64_t kPaddedN = 8;

int64_t matrixCount(const at::Tensor& x) { return x.dim() == 4 ? x.size(0) * x.size(1) : x.size(0); }

void checkSinkhornInput(const at::Tensor& x, int64_t num_iters, int64_t out_flag) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "npu_mhc_sinkhorn: x must be float32, got ", x.scalar_type());
  TORCH_CHECK_VALUE((x.dim() == 3 || x.dim() == 4) && x.size(-1) == x.size(-2) && x.size(-1) <= kPaddedN &&
                        x.size(-1) >= 1 && x.numel() > 0,
                    "npu_mhc_sinkhorn: x must be a non-empty [T, n, n] or [B, S, n, n] with n <= 8, got ", x.sizes());
  TORCH_CHECK_VALUE(num_iters >= 1, "npu_mhc_sinkhorn: num_iters must be at least 1, got ", num_iters);
  TORCH_CHECK_VALUE(out_flag == 0 || out_flag == 1, "npu_mhc_sinkhorn: out_flag must be 0 or 1, got ", out_flag);
}

SinkhornOutputs emptySinkhornOutputs(const at::Tensor& x, int64_t num_iters, int64_t out_flag) {
  // out_flag 0 keeps no intermediate steps: empty tensors (no backward possible).
  const int64_t steps = out_flag == 1 ? 2 * num_iters * matrixCount(x) : 0;
  return {at::empty(x.sizes(), x.options()), at::empty({steps * x.size(-1) * kPaddedN}, x.options()),
          at::empty({steps * kPaddedN}, x.options())};
}

void checkSinkhornBackward(const at::Tensor& grad_y, const at::Tensor& norm, const at::Tensor& sum) {
  TORCH_CHECK_TYPE(grad_y.scalar_type() == at::kFloat && norm.scalar_type() == at::kFloat &&
                       sum.scalar_type() == at::kFloat,
                   "npu_mhc_sinkhorn_backward: grad_y, norm and sum must be float32");
  TORCH_CHECK_VALUE((grad_y.dim() == 3 || grad_y.dim() == 4) && grad_y.size(-1) == grad_y.size(-2),
                    "npu_mhc_sinkhorn_backward: grad_y must be [T, n, n] or [B, S, n, n], got ", grad_y.sizes());
  const int64_t per_step = matrixCount(grad_y) * kPaddedN;
  TORCH_CHECK_VALUE(norm.numel() > 0 && sum.numel() > 0 && sum.numel() % (2 * per_step) == 0 &&
                        norm.numel() == sum.numel() * grad_y.size(-1),
                    "npu_mhc_sinkhorn_backward: norm and sum must be the saved steps of npu_mhc_sinkhorn run with ",
                    "out_flag=1 on a tensor shaped like grad_y; got norm ", norm.sizes(), " and sum ", sum.sizes());
}

}  // namespace

SinkhornOutputs npu_mhc_sinkhorn(const at::Tensor& x, double eps, int64_t num_iters, int64_t out_flag) {
  checkSinkhornInput(x, num_iters, out_flag);
  auto outputs = emptySinkhornOutputs(x, num_iters, out_flag);
  auto& [y, norm_out, sum_out] = outputs;
  const std::optional<at::Tensor> norm = out_flag == 1 ? std::optional<at::Tensor>(norm_out) : std::nullopt;
  const std::optional<at::Tensor> sum = out_flag == 1 ? std::optional<at::Tensor>(sum_out) : std::nullopt;
  EXEC_NPU_CMD(aclnnMhcSinkhorn, x, eps, num_iters, y, norm, sum);
  return outputs;
}

SinkhornOutputs npu_mhc_sinkhorn_meta(const at::Tensor& x, double eps, int64_t num_iters, int64_t out_flag) {
  checkSinkhornInput(x, num_iters, out_flag);
  return emptySinkhornOutputs(x, num_iters, out_flag);
}

at::Tensor npu_mhc_sinkhorn_backward(const at::Tensor& grad_y, const at::Tensor& norm, const at::Tensor& sum) {
  checkSinkhornBackward(grad_y, norm, sum);
  at::Tensor grad_x = at::empty(grad_y.sizes(), grad_y.options());
  EXEC_NPU_CMD(aclnnMhcSinkhornBackward, grad_y, norm, sum, grad_x);
  return grad_x;
}

at::Tensor npu_mhc_sinkhorn_backward_meta(const at::Tensor& grad_y, const at::Tensor& norm, const at::Tensor& sum) {
  checkSinkhornBackward(grad_y, norm, sum);
  return at::empty(grad_y.sizes(), grad_y.options());
}

}  // namespace at_npu::native

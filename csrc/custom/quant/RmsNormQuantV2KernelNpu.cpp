// RmsNormQuantV2KernelNpu.cpp - npu_rms_norm_quant_v2: rms norm over the last dimension, then static quantization
// (int8, int4 packed eight to an int32, hifloat8 codes in uint8, float8) dividing or multiplying by scale, with rstd
// when x requires grad, on aclnnRmsNormQuantV3. Inference op: no gradient upstream.
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kRmsNormQuantV2Op = "npu_rms_norm_quant_v2";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// y (int8 of x's shape, or int32 carrying eight int4 values along the last dimension) and rstd: [..., 1] float32
// when x requires grad (the backward of a surrounding graph reads it), else an empty [0] tensor, as upstream.
std::tuple<at::Tensor, at::Tensor> rmsNormQuantV2Outputs(const at::Tensor& x, const at::Tensor& gamma,
                                                         const at::Tensor& scale,
                                                         const std::optional<at::Tensor>& offset,
                                                         const std::optional<at::Tensor>& beta,
                                                         std::optional<int64_t> dst_dtype) {
  const char* op = kRmsNormQuantV2Op;
  quant::checkFloatInput(op, "x", x);
  quant::checkFloatInput(op, "gamma", gamma);
  quant::checkFloatInput(op, "scale", scale);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 8, op, ": x must have 1 to 8 dimensions, got ", x.sizes());
  const int64_t h = x.size(-1);
  TORCH_CHECK_VALUE((gamma.dim() == 1 || (gamma.dim() == 2 && gamma.size(0) == 1)) && gamma.size(-1) == h, op,
                    ": gamma must be [", h, "] or [1, ", h, "] (x's last dimension), got ", gamma.sizes());
  TORCH_CHECK_VALUE(scale.numel() == 1 || scale.numel() == h, op, ": scale must hold 1 or ", h,
                    " values (one for all, or gamma's shape), got ", scale.sizes());
  TORCH_CHECK_VALUE(!present(offset) || offset->numel() == 1 || offset->numel() == h, op, ": offset must hold 1 or ",
                    h, " values, got ", present(offset) ? offset->sizes() : at::IntArrayRef());
  TORCH_CHECK_VALUE(!present(beta) || beta->numel() == h, op, ": beta must have gamma's shape ", gamma.sizes(),
                    ", got ", present(beta) ? beta->sizes() : at::IntArrayRef());
  at::Tensor y;
  if (const auto holder = dst_dtype.has_value() ? quant::floatTargetHolder(*dst_dtype) : std::nullopt) {
    y = at::empty(x.sizes(), x.options().dtype(*holder));
  } else if (quant::int8OrInt4(op, "dst_dtype", dst_dtype) == quant::Target::kInt4) {
    y = at::empty(quant::packedShape(op, "x", x.sizes(), 8), x.options().dtype(at::kInt));
  } else {
    y = at::empty(x.sizes(), x.options().dtype(at::kChar));
  }
  std::vector<int64_t> rstd_shape{0};
  if (x.requires_grad()) {
    rstd_shape = x.sizes().vec();
    rstd_shape.back() = 1;
  }
  return {y, at::empty(rstd_shape, x.options().dtype(at::kFloat))};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_quant_v2(const at::Tensor& x, const at::Tensor& gamma,
                                                         const at::Tensor& scale,
                                                         const std::optional<at::Tensor>& offset,
                                                         const std::optional<at::Tensor>& beta, double epsilon,
                                                         bool div_mode, std::optional<int64_t> dst_dtype) {
  auto [y, rstd] = rmsNormQuantV2Outputs(x, gamma, scale, offset, beta, dst_dtype);
  const bool output_rstd = x.requires_grad();
  const AclTensorAs y_out = quant::quantizedOutput(y);
  EXEC_NPU_CMD(aclnnRmsNormQuantV3, x, gamma, scale, offset, beta, epsilon, div_mode, output_rstd, y_out, rstd);
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_quant_v2_meta(const at::Tensor& x, const at::Tensor& gamma,
                                                              const at::Tensor& scale,
                                                              const std::optional<at::Tensor>& offset,
                                                              const std::optional<at::Tensor>& beta, double epsilon,
                                                              bool div_mode, std::optional<int64_t> dst_dtype) {
  return rmsNormQuantV2Outputs(x, gamma, scale, offset, beta, dst_dtype);
}

}  // namespace at_npu::native

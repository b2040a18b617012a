// KroneckerQuantKernelNpu.cpp - npu_kronecker_quant: each [M, N] slice of x goes through kronecker_p1 @ x @
// kronecker_p2, then dynamic int4 quantization with one scale per slice, packed eight to an int32, on
// aclnnFlatQuantV2. The float4 (mxfp4) target is a chip number format. Inference op: no gradient upstream.
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kKroneckerQuantOp = "npu_kronecker_quant";

std::tuple<at::Tensor, at::Tensor> kroneckerQuantOutputs(const at::Tensor& x, const at::Tensor& p1,
                                                         const at::Tensor& p2, double clip_ratio,
                                                         std::optional<int64_t> dst_dtype, double dst_type_max) {
  const char* op = kKroneckerQuantOp;
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() == 3, op, ": x must be 3-d [K, M, N], got ", x.sizes());
  TORCH_CHECK_TYPE(p1.scalar_type() == x.scalar_type() && p2.scalar_type() == x.scalar_type(), op,
                   ": kronecker_p1 and kronecker_p2 must have x's dtype ", x.scalar_type(), ", got ",
                   p1.scalar_type(), " and ", p2.scalar_type());
  const int64_t m = x.size(1), n = x.size(2);
  TORCH_CHECK_VALUE(p1.dim() == 2 && p1.size(0) == m && p1.size(1) == m, op, ": kronecker_p1 must be [", m, ", ", m,
                    "] (x's second dimension), got ", p1.sizes());
  TORCH_CHECK_VALUE(p2.dim() == 2 && p2.size(0) == n && p2.size(1) == n, op, ": kronecker_p2 must be [", n, ", ", n,
                    "] (x's last dimension), got ", p2.sizes());
  TORCH_CHECK_VALUE(clip_ratio > 0 && clip_ratio <= 1, op, ": clip_ratio must be in (0, 1], got ", clip_ratio);
  if (dst_dtype.has_value()) {
    // torch.int32 (or torch_npu's int32 code) names the int4-in-int32 output; float4_e2m1 is refused by name.
    TORCH_CHECK_VALUE(quant::targetOf(op, "dst_dtype", *dst_dtype) == quant::Target::kInt32, op,
                      ": dst_dtype must be torch.int32 (int4 values packed eight to an int32), got ", *dst_dtype);
  }
  TORCH_CHECK_VALUE(dst_type_max == 0.0, op, ": dst_type_max sets the float4 output's range (a chip number format ",
                    "the software NPU does not have); the int4 output takes 0.0 or None, got ", dst_type_max);
  return {at::empty(quant::packedShape(op, "x", x.sizes(), 8), x.options().dtype(at::kInt)),
          at::empty({x.size(0)}, x.options().dtype(at::kFloat))};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_kronecker_quant(const at::Tensor& x, const at::Tensor& kronecker_p1,
                                                       const at::Tensor& kronecker_p2,
                                                       std::optional<double> clip_ratio,
                                                       std::optional<int64_t> dst_dtype,
                                                       std::optional<double> dst_type_max) {
  const double clip = clip_ratio.value_or(1.0), type_max = dst_type_max.value_or(0.0);
  auto [out, quant_scale] = kroneckerQuantOutputs(x, kronecker_p1, kronecker_p2, clip, dst_dtype, type_max);
  EXEC_NPU_CMD(aclnnFlatQuantV2, x, kronecker_p1, kronecker_p2, clip, type_max, out, quant_scale);
  return {out, quant_scale};
}

std::tuple<at::Tensor, at::Tensor> npu_kronecker_quant_meta(const at::Tensor& x, const at::Tensor& kronecker_p1,
                                                            const at::Tensor& kronecker_p2,
                                                            std::optional<double> clip_ratio,
                                                            std::optional<int64_t> dst_dtype,
                                                            std::optional<double> dst_type_max) {
  return kroneckerQuantOutputs(x, kronecker_p1, kronecker_p2, clip_ratio.value_or(1.0), dst_dtype,
                               dst_type_max.value_or(0.0));
}

}  // namespace at_npu::native

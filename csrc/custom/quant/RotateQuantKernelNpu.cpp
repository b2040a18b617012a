// RotateQuantKernelNpu.cpp - npu_rotate_quant: x rotated block-wise by a (K, K) matrix along its last dimension, then
// quantized per token (symmetric, dynamic) to int8 or to int4 packed eight to an int32, on aclnnRotateQuant.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kRotateOp = "npu_rotate_quant";
constexpr int64_t kInt4PerInt32 = 8;

// torch.int8 (the default) stores as it is; torch.quint4x2 selects int4 carried eight to an int32.
// The float8 / float4 (mx) targets belong to one chip's number formats and are refused.
bool int4Target(std::optional<int64_t> dst_dtype) {
  const int64_t code = dst_dtype.value_or(static_cast<int64_t>(at::kChar));
  if (code == static_cast<int64_t>(at::kChar)) return false;
  if (code == static_cast<int64_t>(at::kQUInt4x2)) return true;
  TORCH_CHECK_VALUE(false, kRotateOp, ": dst_dtype must be torch.int8 or torch.quint4x2 (int4 packed into int32); "
                    "the float8 / float4 (mx) targets are chip number formats the software NPU does not have; got ",
                    code);
  return false;
}

std::tuple<at::Tensor, at::Tensor> rotateQuantOutputs(const at::Tensor& x, const at::Tensor& rotation,
                                                      const std::optional<at::Tensor>& alpha,
                                                      std::optional<int64_t> dst_dtype, std::optional<int64_t> axis,
                                                      const std::string& round_mode, std::optional<int64_t> scale_alg,
                                                      std::optional<double> dst_type_max,
                                                      std::optional<bool> transpose_y) {
  const bool int4 = int4Target(dst_dtype);
  TORCH_CHECK_TYPE((x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) &&
                       rotation.scalar_type() == x.scalar_type(),
                   kRotateOp, ": x and rotation must both be float16 or both bfloat16, got ", x.scalar_type(), " and ",
                   rotation.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2, kRotateOp, ": x must be 2-D (tokens, n), got ", x.sizes());
  TORCH_CHECK_VALUE(rotation.dim() == 2 && rotation.size(0) == rotation.size(1) && rotation.size(0) > 0, kRotateOp,
                    ": rotation must be a square (K, K) matrix, got ", rotation.sizes());
  TORCH_CHECK_VALUE(x.size(1) % rotation.size(0) == 0, kRotateOp, ": x's last dimension (", x.size(1),
                    ") must be a multiple of K = ", rotation.size(0));
  const int64_t ax = axis.value_or(-1);
  TORCH_CHECK_VALUE(ax == -1 || ax == 1, kRotateOp, ": axis must be -1 (the last dimension), got ", ax);
  TORCH_CHECK_VALUE(round_mode == "rint" || round_mode == "round" || round_mode == "floor", kRotateOp,
                    ": round_mode must be 'rint', 'round' or 'floor', got '", round_mode, "'");
  // alpha, scale_alg, dst_type_max and transpose_y only act with the mx targets (refused above).
  TORCH_CHECK_VALUE(!(alpha.has_value() && alpha->defined()), kRotateOp,
                    ": alpha only applies to the float8 / float4 targets; leave it None");
  TORCH_CHECK_VALUE(scale_alg.value_or(0) == 0, kRotateOp, ": scale_alg must be 0, got ", scale_alg.value_or(0));
  TORCH_CHECK_VALUE(dst_type_max.value_or(0.0) == 0.0, kRotateOp, ": dst_type_max must be 0.0, got ",
                    dst_type_max.value_or(0.0));
  TORCH_CHECK_VALUE(!transpose_y.value_or(false), kRotateOp, ": transpose_y must be False");
  if (int4) {
    TORCH_CHECK_VALUE(x.size(1) % kInt4PerInt32 == 0, kRotateOp, ": int4 output packs 8 values to an int32, so x's ",
                      "last dimension must be a multiple of 8, got ", x.size(1));
  }
  at::Tensor y = int4 ? at::empty({x.size(0), x.size(1) / kInt4PerInt32}, x.options().dtype(at::kInt))
                      : at::empty(x.sizes(), x.options().dtype(at::kChar));
  at::Tensor scale = at::empty({x.size(0)}, x.options().dtype(at::kFloat));
  return std::make_tuple(y, scale);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_rotate_quant(const at::Tensor& x, const at::Tensor& rotation,
                                                    const std::optional<at::Tensor>& alpha,
                                                    std::optional<int64_t> dst_dtype, std::optional<int64_t> axis,
                                                    std::optional<c10::string_view> round_mode,
                                                    std::optional<int64_t> scale_alg,
                                                    std::optional<double> dst_type_max,
                                                    std::optional<bool> transpose_y) {
  const std::string mode(round_mode.value_or("rint"));
  std::tuple<at::Tensor, at::Tensor> outs =
      rotateQuantOutputs(x, rotation, alpha, dst_dtype, axis, mode, scale_alg, dst_type_max, transpose_y);
  at::Tensor y = std::get<0>(outs);
  at::Tensor scale = std::get<1>(outs);
  const int64_t axis_value = axis.value_or(-1);
  const int64_t scale_alg_value = 0;
  const double type_max = 0.0;
  const bool transpose = false;
  EXEC_NPU_CMD(aclnnRotateQuant, x, rotation, alpha, axis_value, mode, scale_alg_value, type_max, transpose, y, scale);
  return std::make_tuple(y, scale);
}

std::tuple<at::Tensor, at::Tensor> npu_rotate_quant_meta(const at::Tensor& x, const at::Tensor& rotation,
                                                         const std::optional<at::Tensor>& alpha,
                                                         std::optional<int64_t> dst_dtype,
                                                         std::optional<int64_t> axis,
                                                         std::optional<c10::string_view> round_mode,
                                                         std::optional<int64_t> scale_alg,
                                                         std::optional<double> dst_type_max,
                                                         std::optional<bool> transpose_y) {
  const std::string mode(round_mode.value_or("rint"));
  return rotateQuantOutputs(x, rotation, alpha, dst_dtype, axis, mode, scale_alg, dst_type_max, transpose_y);
}

}  // namespace at_npu::native

// SwigluGroupQuantKernelNpu.cpp - npu_swiglu_group_quant (swiglu of x's halves, weighted per row, then dynamic
// hifloat8 quantisation per token group, on aclnnSwigluGroupQuant) and npu_swiglu_group_quant_backward (the
// swiglu's and the row weights' gradients, on aclnnSwigluGroupQuantGrad). As upstream, y holds hifloat8 codes in
// uint8 whatever dst_type says, and the backward is called explicitly (the forward has no autograd kernel).
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kForwardOp = "npu_swiglu_group_quant";
constexpr const char* kBackwardOp = "npu_swiglu_group_quant_backward";
constexpr int64_t kDynamicPerGroup = 3;

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

std::vector<int64_t> halvedShape(const char* op, const at::Tensor& x) {
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) % 2 == 0, op, ": x's last dimension must be even (the two swiglu ",
                    "halves), got ", x.sizes());
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() /= 2;
  return shape;
}

void checkGroupIndex(const char* op, const std::optional<at::Tensor>& group_index) {
  if (!present(group_index)) return;
  TORCH_CHECK_VALUE(group_index->dim() == 1, op, ": group_index must be 1-d (token counts per group), got ",
                    group_index->sizes());
  TORCH_CHECK_TYPE(group_index->scalar_type() == at::kLong || group_index->scalar_type() == at::kInt, op,
                   ": group_index must be int64 or int32, got ", group_index->scalar_type());
}

void checkWeight(const char* op, const at::Tensor& x, const std::optional<at::Tensor>& weight) {
  if (!present(weight)) return;
  quant::checkFloatInput(op, "weight", *weight);
  const int64_t rows = x.numel() / std::max<int64_t>(x.size(-1), 1);
  TORCH_CHECK_VALUE(weight->numel() == rows, op, ": weight must hold one value per row of x (", rows, "), got ",
                    weight->sizes());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> forwardOutputs(const at::Tensor& x,
                                                              const std::optional<at::Tensor>& weight,
                                                              const std::optional<at::Tensor>& group_index,
                                                              int64_t quant_mode, bool round_scale,
                                                              double dst_type_max, bool output_origin) {
  const char* op = kForwardOp;
  quant::checkFloatInput(op, "x", x);
  const std::vector<int64_t> y_shape = halvedShape(op, x);
  TORCH_CHECK_VALUE(quant_mode == kDynamicPerGroup, op, ": quant_mode must be 3 (dynamic hifloat8 per token group); ",
                    "2 (static, with scale) is not provided, got ", quant_mode);
  TORCH_CHECK_VALUE(!round_scale, op, ": round_scale is not provided; pass False");
  TORCH_CHECK_VALUE(dst_type_max > 0, op, ": dst_type_max (the hifloat8 value a group's maximum maps to) must be ",
                    "positive, got ", dst_type_max);
  checkGroupIndex(op, group_index);
  checkWeight(op, x, weight);
  const int64_t groups = present(group_index) ? group_index->size(0) : 1;
  at::Tensor y_origin = output_origin ? at::empty(y_shape, x.options()) : at::empty({0}, x.options());
  return {at::empty(y_shape, x.options().dtype(at::kByte)), at::empty({groups}, x.options().dtype(at::kFloat)),
          y_origin};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_swiglu_group_quant(
    const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& group_index,
    const std::optional<at::Tensor>& scale, int64_t dst_type, int64_t quant_mode, int64_t block_size, bool round_scale,
    double clamp_limit, double dst_type_max, bool output_origin) {
  auto [y, y_scale, y_origin] =
      forwardOutputs(x, weight, group_index, quant_mode, round_scale, dst_type_max, output_origin);
  const AclTensorAs y_codes = quant::quantizedOutput(y);
  const int64_t y_code = dtype_codes::kHiFloat8Code - dtype_codes::kNpuDtypeOffset;  // upstream always writes hifloat8
  (void)dst_type;
  const at::Tensor origin = output_origin ? y_origin : at::Tensor();
  EXEC_NPU_CMD(aclnnSwigluGroupQuant, x, weight, group_index, scale, y_code, quant_mode, block_size, round_scale,
               clamp_limit, dst_type_max, output_origin, y_codes, y_scale, origin);
  return {y, y_scale, y_origin};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_swiglu_group_quant_meta(
    const at::Tensor& x, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& group_index,
    const std::optional<at::Tensor>& scale, int64_t dst_type, int64_t quant_mode, int64_t block_size, bool round_scale,
    double clamp_limit, double dst_type_max, bool output_origin) {
  return forwardOutputs(x, weight, group_index, quant_mode, round_scale, dst_type_max, output_origin);
}

namespace {

std::tuple<at::Tensor, at::Tensor> backwardOutputs(const at::Tensor& grad_y, const at::Tensor& x,
                                                   const std::optional<at::Tensor>& weight,
                                                   const std::optional<at::Tensor>& y_origin,
                                                   const std::optional<at::Tensor>& group_index) {
  const char* op = kBackwardOp;
  quant::checkFloatInput(op, "x", x);
  quant::checkFloatInput(op, "grad_y", grad_y);
  const std::vector<int64_t> y_shape = halvedShape(op, x);
  TORCH_CHECK_VALUE(grad_y.numel() == c10::multiply_integers(y_shape) && grad_y.size(-1) == y_shape.back(), op,
                    ": grad_y must have x's rows and half its last dimension ", at::IntArrayRef(y_shape), ", got ",
                    grad_y.sizes());
  checkGroupIndex(op, group_index);
  checkWeight(op, x, weight);
  TORCH_CHECK_VALUE(!present(weight) || (present(y_origin) && y_origin->numel() == grad_y.numel()), op,
                    ": with weight, y_origin (the forward's unquantised output, output_origin=True) is needed");
  at::Tensor grad_weight =
      present(weight) ? at::empty(weight->sizes(), weight->options()) : at::empty({0}, x.options().dtype(at::kFloat));
  return {at::empty(x.sizes(), x.options()), grad_weight};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_swiglu_group_quant_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& y_origin,
                                                                   const std::optional<at::Tensor>& group_index,
                                                                   double clamp_limit) {
  auto [grad_x, grad_weight] = backwardOutputs(grad_y, x, weight, y_origin, group_index);
  const at::Tensor weight_grad = present(weight) ? grad_weight : at::Tensor();
  EXEC_NPU_CMD(aclnnSwigluGroupQuantGrad, grad_y, x, weight, y_origin, group_index, clamp_limit, grad_x, weight_grad);
  return {grad_x, grad_weight};
}

std::tuple<at::Tensor, at::Tensor> npu_swiglu_group_quant_backward_meta(const at::Tensor& grad_y, const at::Tensor& x,
                                                                        const std::optional<at::Tensor>& weight,
                                                                        const std::optional<at::Tensor>& y_origin,
                                                                        const std::optional<at::Tensor>& group_index,
                                                                        double clamp_limit) {
  return backwardOutputs(grad_y, x, weight, y_origin, group_index);
}

}  // namespace at_npu::native

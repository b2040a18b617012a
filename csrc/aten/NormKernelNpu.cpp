// NormKernelNpu.cpp - native_batch_norm / native_layer_norm and their backward kernels on device
// ops. Batch norm updates running_mean / running_var in device memory, in stream order.
#include <ATen/ops/empty.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {
// Statistics are kept in float when the parameters are float and the input is not (mixed
// precision), otherwise in the input's type: what the CPU kernels produce.
at::ScalarType statsType(const at::Tensor& input, TensorRefs params) {
  for (const at::Tensor& p : params) {
    if (p.defined() && p.scalar_type() != input.scalar_type()) return at::kFloat;
  }
  return input.scalar_type();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  const at::Tensor w = weight.value_or(at::Tensor()), b = bias.value_or(at::Tensor());
  const at::Tensor rm = running_mean.value_or(at::Tensor()), rv = running_var.value_or(at::Tensor());
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected a 2D or higher input, got ", input.dim(), "D");
  const int64_t channels = input.size(1);
  TORCH_CHECK(training || (rm.defined() && rv.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  for (const at::Tensor* t : {&w, &b, &rm, &rv}) {
    TORCH_CHECK(!t->defined() || t->numel() == channels, "batch_norm: expected a tensor of ",
                channels, " elements (the input's channels), got ", t->sizes());
  }
  if (!onDevice({input, w, b, rm, rv}, input.device(), /*floating_only=*/true)) {
    auto r = runGeneric("aten::native_batch_norm", "", input, weight, bias, running_mean, running_var,
                        training, momentum, eps);
    return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()};
  }
  c10::DeviceGuard guard(input.device());
  // Under allow_internal_format 4-d batch norm runs and returns NC1HWC0, as on an NPU.
  at::Tensor out = allowInternalFormat() && input.dim() == 4
                       ? emptyPreferringFormat(input.sizes(), input.options(), ACL_FORMAT_NC1HWC0)
                       : at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  const auto stats = input.options().dtype(statsType(input, {w, b, rm, rv}));
  at::Tensor save_mean = at::empty({training ? channels : 0}, stats);
  at::Tensor save_invstd = at::empty({training ? channels : 0}, stats);
  EXEC_NPU_CMD(aclnnBatchNorm, input, w, b, rm, rv, training, momentum, eps, out, save_mean,
               save_invstd);
  return {out, save_mean, save_invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask) {
  const at::Tensor w = weight.value_or(at::Tensor());
  const at::Tensor rm = running_mean.value_or(at::Tensor()), rv = running_var.value_or(at::Tensor());
  const at::Tensor sm = save_mean.value_or(at::Tensor()), si = save_invstd.value_or(at::Tensor());
  if (!onDevice({grad_out, input, w, rm, rv, sm, si}, input.device(), /*floating_only=*/true)) {
    auto r = runGeneric("aten::native_batch_norm_backward", "", grad_out, input, weight, running_mean,
                        running_var, save_mean, save_invstd, train, eps, output_mask);
    return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()};
  }
  c10::DeviceGuard guard(input.device());
  const int64_t channels = input.size(1);
  const auto params = input.options().dtype(w.defined() ? w.scalar_type() : input.scalar_type());
  at::Tensor gi, gw, gb;
  if (output_mask[0]) {
    gi = allowInternalFormat() && input.dim() == 4
             ? emptyPreferringFormat(input.sizes(), input.options(), ACL_FORMAT_NC1HWC0)
             : at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  }
  if (output_mask[1]) gw = at::empty({channels}, params);
  if (output_mask[2]) gb = at::empty({channels}, params);
  if (gi.defined() || gw.defined() || gb.defined()) {
    EXEC_NPU_CMD(aclnnBatchNormBackward, grad_out, input, w, rm, rv, sm, si, train, eps, gi, gw, gb);
  }
  return {gi, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps) {
  const at::Tensor w = weight.value_or(at::Tensor()), b = bias.value_or(at::Tensor());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(!normalized_shape.empty() && axis >= 0 &&
                  input.sizes().slice(static_cast<size_t>(axis)).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ",
              normalized_shape, "], but got input of size", input.sizes());
  for (const at::Tensor* t : {&w, &b}) {
    TORCH_CHECK(!t->defined() || t->sizes().equals(normalized_shape), "Expected weight and bias ",
                "to be of same shape as normalized_shape, but got shape ", t->sizes(),
                " and normalized_shape = ", normalized_shape);
  }
  if (!onDevice({input, w, b}, input.device(), /*floating_only=*/true)) {
    auto r = runGeneric("aten::native_layer_norm", "", input, normalized_shape, weight, bias, eps);
    return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()};
  }
  c10::DeviceGuard guard(input.device());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(static_cast<size_t>(input.dim()), 1);
  at::Tensor out = at::empty(input.sizes(), input.options());
  const auto stats = input.options().dtype(statsType(input, {w, b}));
  at::Tensor mean = at::empty(stat_shape, stats), rstd = at::empty(stat_shape, stats);
  // The device op reads contiguous rows, as PyTorch's CPU kernel does after .contiguous().
  const c10::MaybeOwned<at::Tensor> x = input.expect_contiguous();
  const c10::MaybeOwned<at::Tensor> wc = w.defined() ? w.expect_contiguous()
                                                      : c10::MaybeOwned<at::Tensor>::borrowed(w);
  const c10::MaybeOwned<at::Tensor> bc = b.defined() ? b.expect_contiguous()
                                                      : c10::MaybeOwned<at::Tensor>::borrowed(b);
  EXEC_NPU_CMD(aclnnLayerNorm, *x, normalized_shape, *wc, *bc, eps, out, mean, rstd);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const at::Tensor w = weight.value_or(at::Tensor()), b = bias.value_or(at::Tensor());
  if (!onDevice({grad_out, input, mean, rstd, w, b}, input.device(), /*floating_only=*/true)) {
    auto r = runGeneric("aten::native_layer_norm_backward", "", grad_out, input, normalized_shape,
                        mean, rstd, weight, bias, output_mask);
    return {r[0].toTensor(), r[1].toTensor(), r[2].toTensor()};
  }
  c10::DeviceGuard guard(input.device());
  at::Tensor gi, gw, gb;
  if (output_mask[0]) gi = at::empty(input.sizes(), input.options());
  if (output_mask[1] && w.defined()) gw = at::empty(w.sizes(), w.options());
  if (output_mask[2] && b.defined()) gb = at::empty(b.sizes(), b.options());
  if (gi.defined() || gw.defined() || gb.defined()) {
    EXEC_NPU_CMD(aclnnLayerNormBackward, grad_out, input, normalized_shape, mean, rstd, w, b, gi, gw,
                 gb);
  }
  return {gi, gw, gb};
}

}  // namespace at_npu::native

// ReducedPrecision.cpp - float32 execution of float16 / bfloat16 ops the CPU has no kernel for.
#include "csrc/framework/ReducedPrecision.h"

#include <ATen/ops/_to_copy.h>

#include <optional>
#include <unordered_set>
#include <vector>

#include "csrc/framework/IValueTensors.h"

namespace at_npu::native {
namespace {

bool isReduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

at::Tensor upcast(const at::Tensor& t) {
  if (!isReduced(t)) return t;
  at::Tensor f = at::_to_copy(t, at::kFloat);
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) f.unsafeGetTensorImpl()->set_wrapped_number(true);
  return f;
}

c10::IValue upcastValue(const c10::IValue& v) { return mapTensors(v, upcast); }

// The dtype float32 results go back to: the reduced dtype when every floating input has it (with
// a float32 or float64 input as well, PyTorch's promotion already gives a wider result).
std::optional<at::ScalarType> resultDtype(c10::ArrayRef<c10::IValue> args) {
  std::optional<at::ScalarType> reduced;
  bool wider = false;
  const auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_floating_point()) return;
    if (isReduced(t)) {
      reduced = t.scalar_type();
    } else if (!t.unsafeGetTensorImpl()->is_wrapped_number()) {
      wider = true;
    }
  };
  for (const auto& v : args) {
    if (v.isTensor()) visit(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t);
    }
  }
  return wider ? std::nullopt : reduced;
}

// Index of the mutable argument a return aliases, or -1.
int aliasedArgument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  if (!info || !info->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* a = schema.arguments()[i].alias_info();
    if (a && a->isWrite() && a->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool accumulatesInFloat32(const std::string& name) {
  std::string base = name.rfind("aten::", 0) == 0 ? name.substr(6) : name;
  base = base.substr(0, base.find('.'));
  while (!base.empty() && base.front() == '_') base.erase(0, 1);
  if (!base.empty() && base.back() == '_') base.pop_back();
  static const std::unordered_set<std::string> kOps = {
      "sum", "nansum", "mean", "nanmean", "prod", "var", "std", "var_mean", "std_mean", "norm",
      "renorm", "dist", "trace", "logsumexp", "cumsum", "cumprod", "logcumsumexp", "softmax",
      "log_softmax", "softmax_backward_data", "log_softmax_backward_data", "mm", "bmm", "addmm",
      "addmv", "addbmm", "baddbmm", "addr", "mv", "dot", "vdot", "matmul", "cdist", "cdist_forward",
      "cdist_backward", "pdist", "pdist_forward", "pdist_backward", "euclidean_dist", "trapezoid",
      "trapz", "histc", "index_add", "scatter_add", "scatter_reduce", "index_reduce", "col2im", "im2col",
      "embedding_bag", "embedding_bag_backward", "embedding_dense_backward", "foreach_norm",
      "binary_cross_entropy", "binary_cross_entropy_backward", "binary_cross_entropy_with_logits",
      "kl_div", "native_group_norm", "native_group_norm_backward", "native_batch_norm",
      "native_batch_norm_backward", "native_batch_norm_legit", "native_batch_norm_legit_functional",
      "native_batch_norm_legit_no_training", "batch_norm_with_update", "batch_norm_no_update",
      "batch_norm_backward", "native_layer_norm", "native_layer_norm_backward", "fused_rms_norm",
      "grid_sampler_2d", "grid_sampler_2d_backward", "grid_sampler_3d", "grid_sampler_3d_backward",
      "convolution", "convolution_backward", "convolution_overrideable", "slow_conv2d_forward",
      "slow_conv2d_backward", "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
      "slow_conv_transpose2d", "slow_conv_transpose3d", "conv_depthwise2d", "conv_depthwise3d"};
  static const char* const kPrefixes[] = {"upsample_", "avg_pool", "adaptive_avg_pool", "linalg_"};
  if (kOps.count(base)) return true;
  for (const char* p : kPrefixes) {
    if (base.rfind(p, 0) == 0) return true;
  }
  return base.find("_loss") != std::string::npos;  // mse_loss, nll_loss2d_backward, ...
}

bool hasReducedPrecisionTensor(c10::ArrayRef<c10::IValue> args) {
  // Only when no float32 / float64 tensor is mixed in: mixed dtypes keep the kernel's own rules
  // (and errors, e.g. mm of float and half).
  return resultDtype(args).has_value();
}

bool isMissingReducedPrecisionKernel(const std::string& message) {
  // PyTorch's dispatch macros, and the kernels that refuse reduced precision in words of their own.
  static const char* const kMessages[] = {
      "not implemented for 'Half'", "not implemented for 'BFloat16'", "Unsupported datatype for",
      "Low precision dtypes not supported"};
  for (const char* m : kMessages) {
    if (message.find(m) != std::string::npos) return true;
  }
  return false;
}

void runUpcast(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               const std::function<void(torch::jit::Stack*)>& run) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> originals(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  const std::optional<at::ScalarType> reduced = resultDtype(originals);
  torch::jit::drop(*stack, nargs);
  std::vector<c10::IValue> upcast_args;
  for (size_t i = 0; i < nargs; ++i) {
    // A dtype argument naming the reduced type (cumsum(..., dtype=torch.half)) follows the tensors.
    // (real_type: the schema's `ScalarType` arguments are ints to the interpreter.)
    const auto& type = schema.arguments()[i].real_type();
    auto kind = type->kind();
    if (kind == c10::TypeKind::OptionalType) kind = type->containedType(0)->kind();
    const c10::IValue& v = originals[i];
    if (kind == c10::TypeKind::ScalarTypeType && v.isInt() &&
        (v.toScalarType() == at::kHalf || v.toScalarType() == at::kBFloat16)) {
      upcast_args.emplace_back(at::kFloat);
      continue;
    }
    upcast_args.push_back(upcastValue(v));
  }
  for (const auto& v : upcast_args) stack->push_back(v);
  run(stack);
  // In-place and out= arguments: the op wrote into float32 copies; write them back.
  for (size_t i = 0; i < nargs; ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (!info || !info->isWrite() || !originals[i].isTensor()) continue;
    const at::Tensor& original = originals[i].toTensor();
    const at::Tensor& computed = upcast_args[i].toTensor();
    if (original.defined() && !original.is_same(computed)) {
      if (original.sizes() != computed.sizes()) original.resize_(computed.sizes());
      original.copy_(computed);
    }
  }
  const size_t nret = schema.returns().size();
  for (size_t r = 0; r < nret; ++r) {
    c10::IValue& value = (*stack)[stack->size() - nret + r];
    const int alias = aliasedArgument(schema, r);
    if (alias >= 0) {
      value = originals[alias];
    } else if (reduced && value.isTensor() && value.toTensor().scalar_type() == at::kFloat) {
      value = c10::IValue(at::_to_copy(value.toTensor(), *reduced));
    }
  }
}

}  // namespace at_npu::native

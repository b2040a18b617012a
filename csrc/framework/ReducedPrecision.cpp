// ReducedPrecision.cpp - float32 execution of float16 / bfloat16 ops the CPU has no kernel for.
#include "csrc/framework/ReducedPrecision.h"

#include <ATen/ops/_to_copy.h>

#include <optional>
#include <vector>

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

c10::IValue upcastValue(const c10::IValue& v) {
  if (v.isTensor()) return c10::IValue(upcast(v.toTensor()));
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(upcast(t));
    return c10::IValue(std::move(out));
  }
  if (v.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& t : v.toOptionalTensorList().vec()) {
      out.push_back(t.has_value() ? std::optional<at::Tensor>(upcast(*t)) : std::nullopt);
    }
    return c10::IValue(std::move(out));
  }
  return v;
}

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

bool isMissingReducedPrecisionKernel(const std::string& message) {
  return message.find("not implemented for 'Half'") != std::string::npos ||
         message.find("not implemented for 'BFloat16'") != std::string::npos;
}

void runUpcast(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               const std::function<void(torch::jit::Stack*)>& run) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> originals(stack->end() - static_cast<std::ptrdiff_t>(nargs), stack->end());
  const std::optional<at::ScalarType> reduced = resultDtype(originals);
  torch::jit::drop(*stack, nargs);
  std::vector<c10::IValue> upcast_args;
  for (const auto& v : originals) upcast_args.push_back(upcastValue(v));
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

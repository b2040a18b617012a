// OverflowCheck.cpp - inf/nan scans of host views for the generic executor's overflow detection.
#include "csrc/framework/OverflowCheck.h"

#include <ATen/ops/isfinite.h>
#include <npu/runtime.h>

#include <cmath>

namespace at_npu::native {
namespace {

bool isFiniteTensor(const at::Tensor& t) {
  if (!t.defined() || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) return true;
  return at::isfinite(t).all().item<bool>();
}

bool isFiniteValue(const c10::IValue& v) {
  if (v.isTensor()) return isFiniteTensor(v.toTensor());
  if (v.isDouble()) return std::isfinite(v.toDouble());
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) {
      if (!isFiniteTensor(t)) return false;
    }
    return true;
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (!isFiniteValue(e)) return false;
    }
  }
  return true;
}

}  // namespace

TaskOverflowCheck::TaskOverflowCheck(c10::ArrayRef<c10::IValue> args,
                                     const c10::FunctionSchema& schema) {
  if (nrtOverflowDetectionEnabled() == 0) return;
  armed_ = true;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i < schema.arguments().size() && schema.arguments()[i].is_out()) continue;
    if (!isFiniteValue(args[i])) {
      armed_ = false;
      return;
    }
  }
}

void TaskOverflowCheck::finish(const std::vector<at::Tensor>& fresh,
                               const std::vector<at::Tensor>& written) const {
  if (!armed_) return;
  for (const auto* outputs : {&fresh, &written}) {
    for (const at::Tensor& t : *outputs) {
      if (!isFiniteTensor(t)) {
        nrtRaiseOverflowStatus();
        return;
      }
    }
  }
}

}  // namespace at_npu::native

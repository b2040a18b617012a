// OverflowCheck.h - overflow detection for host tasks of the generic executor: a task whose
// arguments are all finite and whose outputs hold inf/nan raises its device's float status (the
// named device ops do the same in opslib). Costs nothing while detection is off.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <vector>

namespace at_npu::native {

// On the stream's worker, around one task: construct before the kernel (it judges the arguments,
// tensors and scalars, while they still hold their inputs; out= arguments are not inputs), call
// finish() after it.
class TaskOverflowCheck {
 public:
  TaskOverflowCheck(c10::ArrayRef<c10::IValue> args, const c10::FunctionSchema& schema);
  // The tensors the task wrote: its fresh outputs and its in-place / out= arguments.
  void finish(const std::vector<at::Tensor>& fresh, const std::vector<at::Tensor>& written) const;

 private:
  bool armed_ = false;  // detection on and every argument finite
};

}  // namespace at_npu::native

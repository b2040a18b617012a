// CollectiveOperands.cpp - the host views a collective moves data through; operands in a private
// storage format go through a base-format copy (the wire carries logical elements, not tiles).
#include <c10/core/StreamGuard.h>

#include <algorithm>

#include "csrc/distributed/ProcessGroupHCCL.h"
#include "csrc/framework/HostView.h"
#include "csrc/framework/StorageDesc.h"

namespace c10d_npu {

at::Tensor ProcessGroupHCCL::Collective::view(const at::Tensor& t) {
  if (!at_npu::native::privateDesc(t)) return at_npu::native::hostView(t);
  for (const auto& [operand, copy] : staged) {
    if (operand.is_same(t)) return at_npu::native::hostView(copy);
  }
  // A fresh npu tensor is plain; copy_ runs TransData on the caller's current stream, so the
  // collective (queued behind that stream) sees the converted values.
  at::Tensor copy = at::empty(t.sizes(), t.options());
  copy.copy_(t);
  staged.emplace_back(t, copy);
  return at_npu::native::hostView(copy);
}

std::vector<at::Tensor> ProcessGroupHCCL::Collective::views(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const at::Tensor& t : ts) out.push_back(view(t));
  return out;
}

namespace {
bool isOneOf(const at::Tensor& t, const std::vector<at::Tensor>& ts) {
  return std::any_of(ts.begin(), ts.end(), [&](const at::Tensor& o) { return o.is_same(t); });
}
}  // namespace

bool ProcessGroupHCCL::Collective::writesBack() const {
  return std::any_of(staged.begin(), staged.end(), [&](const auto& s) { return isOneOf(s.first, outputs); });
}

void ProcessGroupHCCL::Collective::writeBack(const c10::Stream& comm) const {
  c10::StreamGuard guard(comm);
  for (const auto& [operand, copy] : staged) {
    if (isOneOf(operand, outputs)) operand.copy_(copy);  // TransData back into the operand's format
  }
}

}  // namespace c10d_npu

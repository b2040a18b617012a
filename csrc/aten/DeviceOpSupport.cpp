// DeviceOpSupport.cpp - dtype support, operand placement and out= checks for device-op adapters.
#include "csrc/aten/DeviceOpSupport.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>

namespace at_npu::native {

bool deviceOpsSupport(std::initializer_list<at::Tensor> tensors) {
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    switch (t.scalar_type()) {
      case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kDouble: case at::kChar:
      case at::kByte: case at::kShort: case at::kInt: case at::kLong: case at::kBool:
        break;
      default:
        return false;
    }
    if (t.is_conj() || t.is_neg()) return false;
  }
  return true;
}

at::Tensor deviceOperand(const at::Tensor& t, const at::Device& device, const char* op) {
  if (t.device() == device) return t;
  TORCH_CHECK(t.is_cpu() && t.dim() == 0, "Expected all tensors to be on the same device, but ",
              "found at least two devices, ", device, " and ", t.device(), "! (", op, ")");
  return at::empty({}, t.options().device(device)).fill_(t.item());
}

at::ScalarType prepareBinaryOut(const char* op, const at::Tensor& self, const at::Tensor& other,
                                const at::Tensor& out) {
  const at::ScalarType common = at::result_type(self, other);
  TORCH_CHECK(c10::canCast(common, out.scalar_type()), "result type ", common,
              " can't be cast to the desired output type ", out.scalar_type());
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  at::assert_no_partial_overlap(out, other);
  at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));
  return common;
}

void prepareUnaryOut(const char* op, const at::Tensor& self, const at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  at::native::resize_output(out, self.sizes());
}

}  // namespace at_npu::native

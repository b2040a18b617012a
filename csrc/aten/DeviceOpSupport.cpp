// DeviceOpSupport.cpp - dtype support, operand placement and out= checks for device-op adapters.
#include "csrc/aten/DeviceOpSupport.h"

#include "csrc/framework/FormatCast.h"

#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <c10/core/WrapDimMinimal.h>

namespace at_npu::native {

bool deviceOpsSupport(TensorRefs tensors) {
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!deviceOpsSupport(t.scalar_type()) || t.is_conj() || t.is_neg()) return false;
  }
  return true;
}

bool onDevice(TensorRefs tensors, const at::Device& device, bool floating_only) {
  if (!deviceOpsSupport(tensors)) return false;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.device() != device || (floating_only && !at::isFloatingType(t.scalar_type()))) return false;
  }
  return true;
}

c10::MaybeOwned<at::Tensor> deviceOperand(const at::Tensor& t, const at::Device& device,
                                          const char* op) {
  if (t.device() == device) return c10::MaybeOwned<at::Tensor>::borrowed(t);
  TORCH_CHECK(t.is_cpu() && t.dim() == 0, "Expected all tensors to be on the same device, but ",
              "found at least two devices, ", device, " and ", t.device(), "! (", op, ")");
  at::Tensor on_device = at::empty({}, t.options().device(device));
  on_device.fill_(t.item());
  return c10::MaybeOwned<at::Tensor>::owned(std::move(on_device));
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
  adoptInputFormat(out, self, other);
  return common;
}

void prepareUnaryOut(const char* op, const at::Tensor& self, const at::Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  at::native::resize_output(out, self.sizes());
  adoptInputFormat(out, self);
}

void checkOutOverlap(const at::Tensor& out, TensorRefs inputs) {
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& t : inputs) {
    if (t.defined()) at::assert_no_overlap(out, t);
  }
}

std::vector<int64_t> reducedShape(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) {
  const int64_t ndim = self.dim();
  if (ndim == 0) {
    // A 0-d tensor reduces to a 0-d tensor; its only valid dims are 0 and -1.
    if (dims.has_value()) {
      for (int64_t d : *dims) c10::maybe_wrap_dim(d, 0);
    }
    return {};
  }
  std::vector<bool> reduce(static_cast<size_t>(ndim), !dims.has_value() || dims->empty());
  if (dims.has_value()) {
    for (int64_t d : *dims) {
      const int64_t wrapped = c10::maybe_wrap_dim(d, ndim);
      TORCH_CHECK(!reduce[wrapped] || dims->empty(), "dim ", wrapped,
                  " appears multiple times in the list of dims");
      reduce[wrapped] = true;
    }
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < ndim; ++d) {
    if (!reduce[d]) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

}  // namespace at_npu::native

// HostView.cpp - zero-copy CPU views of npu memory.
#include "csrc/framework/HostView.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/_neg_view.h>

namespace at_npu::native {

at::Tensor hostView(const at::Tensor& npu_tensor) {
  TORCH_INTERNAL_ASSERT(npu_tensor.device().type() == c10::DeviceType::PrivateUse1);
  const c10::Storage& storage = npu_tensor.storage();
  // A tensor whose storage was shrunk or freed under it (untyped_storage().resize_(0)) would send
  // the host kernel outside the allocation: refuse it, as a device op refuses a NULL operand.
  if (npu_tensor.numel() > 0) {
    const size_t needed = at::detail::computeStorageNbytes(
        npu_tensor.sizes(), npu_tensor.strides(), npu_tensor.dtype().itemsize(),
        npu_tensor.storage_offset());
    TORCH_CHECK(storage.data() != nullptr && needed <= storage.nbytes(), "an npu tensor of sizes ",
                npu_tensor.sizes(), " and dtype ", npu_tensor.dtype(), " needs ", needed,
                " bytes of storage but its storage holds ", storage.nbytes(),
                " (was the storage resized with untyped_storage().resize_() or freed?)");
  }
  // The view spans the whole npu storage (not just this tensor's elements): CPU out= kernels may
  // resize their output within that capacity, as they can on a CPU tensor.
  c10::Storage host(c10::Storage::use_byte_size_t(), storage.nbytes(),
                    c10::DataPtr(storage.mutable_data(), c10::Device(c10::DeviceType::CPU)),
                    /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      std::move(host), c10::DispatchKeySet(c10::DispatchKey::CPU), npu_tensor.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(npu_tensor.sizes(), npu_tensor.strides(),
                                                    npu_tensor.storage_offset());
  if (npu_tensor.is_conj()) view = view.conj();
  if (npu_tensor.is_neg()) view = at::_neg_view(view);
  return view;
}

ViewGeometry ViewGeometry::of(const at::Tensor& view) {
  ViewGeometry g;
  g.sizes.assign(view.sizes().begin(), view.sizes().end());
  g.strides.assign(view.strides().begin(), view.strides().end());
  g.offset = view.storage_offset();
  return g;
}

void ViewGeometry::restore(const at::Tensor& view) const {
  view.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
}

}  // namespace at_npu::native

// ChangeDataPtrKernelNpu.cpp - npu_change_data_ptr: re-points a tensor's storage into another storage
// (the combine-tensors utilities put many tensors into one buffer this way).
#include "csrc/custom/NpuCustomFunctions.h"

namespace at_npu::native {
namespace {

// The new DataPtr keeps the source storage alive: dst never points into freed memory, whatever outlives
// what.
void releaseSourceStorage(void* context) { delete static_cast<c10::Storage*>(context); }

}  // namespace

int64_t npu_change_data_ptr(const at::Tensor& dst, const at::Tensor& src, int64_t index) {
  TORCH_CHECK_VALUE(dst.device().type() == c10::DeviceType::PrivateUse1 && src.device() == dst.device(),
                    "npu_change_data_ptr: dst and src must be npu tensors on one device, got ", dst.device(),
                    " and ", src.device());
  TORCH_CHECK_VALUE(dst.dtype() == src.dtype(), "npu_change_data_ptr: dst is ", dst.dtype(), " but src is ",
                    src.dtype(), "; they must share a dtype");
  TORCH_CHECK_VALUE(index >= 0, "npu_change_data_ptr: index must be >= 0, got ", index);
  const int64_t item = static_cast<int64_t>(dst.element_size());
  const int64_t need = (index + dst.numel()) * item;
  const int64_t have = static_cast<int64_t>(src.storage().nbytes()) - src.storage_offset() * item;
  TORCH_CHECK_VALUE(need <= have, "npu_change_data_ptr: ", dst.numel(), " elements from element ", index,
                    " run past src's storage (", have / item, " elements from its offset)");
  char* target = static_cast<char*>(src.storage().mutable_data()) + (src.storage_offset() + index) * item;
  auto* keep = new c10::Storage(src.storage());
  dst.storage().set_data_ptr_noswap(at::DataPtr(target, keep, &releaseSourceStorage, dst.device()));
  dst.storage().set_nbytes(static_cast<size_t>(dst.numel() * item));
  dst.unsafeGetTensorImpl()->set_storage_offset(0);
  return 0;
}

int64_t npu_change_data_ptr_meta(const at::Tensor& dst, const at::Tensor& src, int64_t index) { return 0; }

}  // namespace at_npu::native

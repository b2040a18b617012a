// EmptyWithFormatKernelNpu.cpp - empty_with_format / unsafe_empty_with_format: uninitialised npu tensors
// stored in a given format, optionally at an aligned base address; empty_with_swapped_memory.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/empty.h>
#include <npu/format_layout.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/StorageDesc.h"

namespace at_npu::native {
namespace {

namespace nf = npu::formats;

at::TensorOptions factoryOptions(std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                 std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return at::TensorOptions()
      .dtype(dtype.value_or(at::get_default_dtype_as_scalartype()))
      .layout(layout)
      .device(device.value_or(at::Device(c10::DeviceType::PrivateUse1)))
      .pinned_memory(pin_memory);
}

// `size` in `acl_format`: a private format when internal formats are allowed or `keep` says so (else
// the base format, as torch_npu does with internal formats off); a base format other than the rank's
// default is recorded on the storage.
at::Tensor emptyInFormat(at::IntArrayRef size, const at::TensorOptions& options, int64_t acl_format, bool keep) {
  const FormatChoice choice = resolveFormat(at::empty(size, options.device(at::kMeta)), acl_format, std::nullopt);
  at::Tensor out;
  if (nf::IsPrivateFormat(choice.format)) {
    out = keep || allowInternalFormat() ? emptyWithFormat(size, options, choice.format, choice.c0)
                                        : at::empty(size, options);
  } else {
    out = at::empty(size, options);
    if (choice.format != guessBaseFormat(out.dim())) {
      npuStorageImpl(out.storage())->setDesc(makeDesc(out.sizes(), out.dtype(), choice.format, choice.c0));
    }
  }
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(out);
  }
  return out;
}

// A contiguous tensor of `size` whose first element sits at a multiple of `kb` KiB.
at::Tensor emptyAligned(at::IntArrayRef size, const at::TensorOptions& options, int64_t kb) {
  const int64_t align = kb * 1024;
  const int64_t item = static_cast<int64_t>(options.dtype().itemsize());
  const int64_t nbytes = static_cast<int64_t>(at::detail::computeStorageNbytesContiguous(size, item));
  at::Tensor raw = at::empty({nbytes + align}, options.dtype(at::kByte));
  const auto base = reinterpret_cast<uintptr_t>(raw.data_ptr());
  const int64_t skip = static_cast<int64_t>((align - base % align) % align);
  TORCH_INTERNAL_ASSERT(skip % item == 0, "empty_with_format: allocator blocks are not ", item, "-byte aligned");
  at::Tensor out = at::empty({0}, options);
  out.set_(raw.storage(), skip / item, size, c10::contiguous_strides(size));
  return out;
}

}  // namespace

at::Tensor empty_with_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory, int64_t acl_format,
                             std::optional<int64_t> base_addr_aligned_kb) {
  const at::TensorOptions options = factoryOptions(dtype, layout, device, pin_memory);
  const int64_t kb = base_addr_aligned_kb.value_or(0);
  TORCH_CHECK_VALUE(kb >= 0 && kb <= 16, "empty_with_format: base_addr_aligned_kb must be in [0, 16], got ", kb);
  if (kb == 0) return emptyInFormat(size, options, acl_format, /*keep=*/false);
  const FormatChoice choice = resolveFormat(at::empty(size, options.device(at::kMeta)), acl_format, std::nullopt);
  TORCH_CHECK_VALUE(!nf::IsPrivateFormat(choice.format), "empty_with_format: base_addr_aligned_kb applies to base ",
                    "formats (ND, NCHW, ...); acl_format ", acl_format, " is a private one");
  return emptyAligned(size, options, kb);
}

at::Tensor unsafe_empty_with_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                    std::optional<at::Layout> layout, std::optional<at::Device> device,
                                    std::optional<bool> pin_memory, int64_t acl_format, bool keep_format) {
  return emptyInFormat(size, factoryOptions(dtype, layout, device, pin_memory), acl_format, keep_format);
}

// Host memory mapped into the device's address space, on Ascend (to hold more than device memory
// does). The software NPU's device memory is host memory already: this is an uninitialised npu
// tensor of the caching allocator, filled as `empty` is under deterministic fill.
at::Tensor empty_with_swapped_memory(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                     std::optional<at::Device> device) {
  const at::Device where = device.value_or(at::Device(c10::DeviceType::PrivateUse1));
  TORCH_CHECK_VALUE(where.type() == c10::DeviceType::PrivateUse1, "empty_with_swapped_memory: device must be an npu "
                    "device, got ", where);
  return emptyInFormat(size, factoryOptions(dtype, std::nullopt, where, std::nullopt), /*acl_format=*/2,
                       /*keep=*/false);
}

at::Tensor empty_with_swapped_memory_meta(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                          std::optional<at::Device> device) {
  return at::empty(size, factoryOptions(dtype, std::nullopt, at::Device(at::kMeta), std::nullopt));
}

// Meta / fake tensors: the logical tensor (formats are a storage property).
at::Tensor empty_with_format_meta(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                  std::optional<at::Layout> layout, std::optional<at::Device> device,
                                  std::optional<bool> pin_memory, int64_t acl_format,
                                  std::optional<int64_t> base_addr_aligned_kb) {
  return at::empty(size, factoryOptions(dtype, layout, at::Device(at::kMeta), pin_memory));
}

at::Tensor unsafe_empty_with_format_meta(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                                         std::optional<bool> pin_memory, int64_t acl_format, bool keep_format) {
  return at::empty(size, factoryOptions(dtype, layout, at::Device(at::kMeta), pin_memory));
}

}  // namespace at_npu::native

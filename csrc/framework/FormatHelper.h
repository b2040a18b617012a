// FormatHelper.h - npu storage formats as torch_npu presents them: a tensor's format, which formats
// a dtype and shape can take (with the errors users see), storage sizes, whole-tensor checks and
// the torch.npu.config.allow_internal_format switch.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <optional>

#include "StorageDesc.h"

namespace at_npu::native {

namespace detail {
extern std::atomic<bool> allow_internal_format;
}  // namespace detail

// torch.npu.config.allow_internal_format (default False, as torch_npu): when set, ops may return
// private formats (convolution and batch norm NC1HWC0, matmul FRACTAL_NZ, elementwise ops the
// format of their inputs) and take them without TransData; when clear, every op sees base formats.
inline bool allowInternalFormat() { return detail::allow_internal_format.load(std::memory_order_relaxed); }
void setAllowInternalFormat(bool allow);

// The plain format torch_npu gives a fresh tensor of `dim` dims: NCHW (4), NCDHW (5), else ND.
int64_t guessBaseFormat(int64_t dim);
// torch_npu.get_npu_format(t).
int64_t npuFormatOf(const at::Tensor& t);
const char* formatName(int64_t format);
// Element types the private formats hold: float32, float16, bfloat16, int8, uint8, int16, int32.
bool holdsPrivateFormats(at::ScalarType type);

// A requested cast resolved as torch_npu does: 0-d tensors stay ND, FRACTAL_NZ of fewer than 2
// dims falls back to ND with a warning; unknown formats, dtypes a private format cannot hold and
// ranks it cannot take raise ValueError naming them and what is allowed.
struct FormatChoice {
  int64_t format;
  int64_t c0;  // lanes of the innermost block; FRACTAL_NZ: 32 bytes' worth of customize_dtype
};
FormatChoice resolveFormat(const at::Tensor& t, int64_t acl_format, std::optional<int64_t> customize_dtype);

// A description of a whole tensor of `sizes` stored in `format`.
c10::intrusive_ptr<NPUStorageDesc> makeDesc(at::IntArrayRef sizes, caffe2::TypeMeta dtype, int64_t format,
                                            int64_t c0);

// True when `t` is the whole tensor its private storage holds: the base shape, contiguous,
// offset 0 and the storage's dtype (so its storage can be handed to a device op as it is).
bool isWholeTensor(const at::Tensor& t, const NPUStorageDesc& desc);
// A view of a private storage indexes its base tensor: reaching past it (into the layout's padding)
// cannot be expressed, and raises saying so.
void checkPrivateFormatView(const at::Tensor& view);

// The whole tensor or a permutation of its dims (a transposed weight): what matmuls take natively.
bool isPermutedWholeTensor(const at::Tensor& t, const NPUStorageDesc& desc);

}  // namespace at_npu::native

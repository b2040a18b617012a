// FormatHelper.cpp - format names, resolution of requested casts with their errors, descriptions.
#include "csrc/framework/FormatHelper.h"

#include <c10/util/Exception.h>
#include <npu/format_layout.h>

#include <string>

namespace at_npu::native {

namespace detail {
std::atomic<bool> allow_internal_format{false};
}  // namespace detail

namespace nf = npu::formats;

namespace {

constexpr const char* kKnownFormats =
    "0 (NCHW), 1 (NHWC), 2 (ND), 3 (NC1HWC0), 4 (FRACTAL_Z), 27 (NDHWC), 29 (FRACTAL_NZ), "
    "30 (NCDHW), 32 (NDC1HWC0), 33 (FRACTAL_Z_3D)";

}  // namespace

bool holdsPrivateFormats(at::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kChar: case at::kByte:
    case at::kShort: case at::kInt:
      return true;
    default:
      return false;
  }
}

void setAllowInternalFormat(bool allow) { detail::allow_internal_format.store(allow); }

int64_t guessBaseFormat(int64_t dim) {
  if (dim == 4) return ACL_FORMAT_NCHW;
  if (dim == 5) return ACL_FORMAT_NCDHW;
  return ACL_FORMAT_ND;
}

const char* formatName(int64_t format) { return nf::FormatName(format); }

int64_t npuFormatOf(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "get_npu_format: expected an npu tensor, got one on ", t.device());
  if (const NPUStorageDesc* desc = t.has_storage() ? storageDesc(t.storage()) : nullptr) {
    return desc->npu_format;
  }
  return guessBaseFormat(t.dim());
}

FormatChoice resolveFormat(const at::Tensor& t, int64_t acl_format, std::optional<int64_t> customize_dtype) {
  TORCH_CHECK_VALUE(nf::IsBaseFormat(acl_format) || nf::IsPrivateFormat(acl_format),
                    "npu_format_cast: unknown acl_format ", acl_format, "; use one of ", kKnownFormats);
  TORCH_CHECK_VALUE(acl_format != ACL_FORMAT_UNDEFINED, "npu_format_cast: acl_format -1 (UNDEFINED) is not ",
                    "a storage format; use one of ", kKnownFormats);
  if (!nf::IsPrivateFormat(acl_format)) return {acl_format, nf::kBlock};
  const char* name = nf::FormatName(acl_format);
  TORCH_CHECK_VALUE(holdsPrivateFormats(t.scalar_type()), "npu_format_cast: ", name, " cannot hold ",
                    t.scalar_type(), " tensors; private formats hold float32, float16, bfloat16, int8, ",
                    "uint8, int16 and int32 (cast the dtype first, or keep a base format: 0 NCHW, 2 ND)");
  if (t.dim() == 0) return {ACL_FORMAT_ND, nf::kBlock};
  if (acl_format == ACL_FORMAT_FRACTAL_NZ && t.dim() < 2) {
    TORCH_WARN_ONCE("Cannot create tensor with NZ format while dim < 2, tensor will be created with ND format.");
    return {ACL_FORMAT_ND, nf::kBlock};
  }
  const std::string rank = nf::CheckRank(acl_format, static_cast<size_t>(t.dim()));
  TORCH_CHECK_VALUE(rank.empty(), "npu_format_cast: ", rank, ", got a tensor of shape ", t.sizes());
  int64_t c0 = nf::DefaultC0(acl_format, t.element_size());
  if (customize_dtype.has_value() && acl_format == ACL_FORMAT_FRACTAL_NZ) {
    TORCH_CHECK_VALUE(*customize_dtype >= 0 && *customize_dtype < static_cast<int64_t>(c10::ScalarType::NumOptions),
                      "npu_format_cast: customize_dtype ", *customize_dtype, " is not a dtype");
    const auto custom = static_cast<c10::ScalarType>(*customize_dtype);
    TORCH_CHECK_VALUE(holdsPrivateFormats(custom), "npu_format_cast: customize_dtype ", custom,
                      " cannot lay out FRACTAL_NZ blocks; use float32, float16, bfloat16, int8, uint8, ",
                      "int16 or int32");
    c0 = 32 / static_cast<int64_t>(c10::elementSize(custom));
  }
  return {acl_format, c0};
}

c10::intrusive_ptr<NPUStorageDesc> makeDesc(at::IntArrayRef sizes, caffe2::TypeMeta dtype, int64_t format,
                                            int64_t c0) {
  auto desc = c10::make_intrusive<NPUStorageDesc>();
  desc->base_sizes.assign(sizes.begin(), sizes.end());
  desc->base_strides.resize(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    desc->base_strides[i] = step;
    step *= std::max<int64_t>(sizes[i], 1);
  }
  const std::vector<int64_t> base(sizes.begin(), sizes.end());
  const auto storage = nf::StorageShape(format, base, c0);
  desc->storage_sizes.assign(storage.begin(), storage.end());
  desc->origin_format = nf::BaseFormatOf(format);
  desc->npu_format = format;
  desc->c0 = c0;
  desc->data_type = dtype;
  return desc;
}

bool isWholeTensor(const at::Tensor& t, const NPUStorageDesc& desc) {
  return t.storage_offset() == 0 && t.dtype() == desc.data_type &&
         t.sizes().equals(c10::IntArrayRef(desc.base_sizes.data(), desc.base_sizes.size())) &&
         t.is_contiguous();
}

}  // namespace at_npu::native

namespace at_npu::native {

void checkPrivateFormatView(const at::Tensor& view) {
  const NPUStorageDesc* desc = privateDesc(view);
  if (desc == nullptr || view.numel() == 0) return;
  int64_t last = view.storage_offset();
  for (int64_t d = 0; d < view.dim(); ++d) last += (view.size(d) - 1) * view.stride(d);
  const int64_t reach = (last + 1) * static_cast<int64_t>(view.element_size());
  const int64_t base = desc->baseNumel() * static_cast<int64_t>(desc->data_type.itemsize());
  TORCH_CHECK(reach <= base, "as_strided: a view of a ", formatName(desc->npu_format),
              " tensor cannot reach past its base tensor ",
              c10::IntArrayRef(desc->base_sizes.data(), desc->base_sizes.size()), " (the view ends at byte ", reach,
              " of ", base, "): the rest of its storage is the layout's padding. Convert it with ",
              "torch_npu.npu_format_cast(t, 2) first (docs/formats.md)");
}

bool isPermutedWholeTensor(const at::Tensor& t, const NPUStorageDesc& desc) {
  if (t.storage_offset() != 0 || t.dtype() != desc.data_type || t.dim() != static_cast<int64_t>(desc.base_sizes.size())) {
    return false;
  }
  const auto base = nf::BaseDimsOf(t.sizes().vec(), t.strides().vec(), 0);
  return base.size() == desc.base_sizes.size() && std::equal(base.begin(), base.end(), desc.base_sizes.begin());
}

}  // namespace at_npu::native

// FormatSerialization.cpp - torch.save / torch.load keep private formats. A storage is saved as its
// logical contents (its base tensor in plain layout at the start: storage.cpu() reads it through
// the base-layout stand-in), and the tensor's metadata names the format and base shape; loading on
// npu puts the storage back into the format. The keys are torch_npu's, so checkpoints travel both
// ways; a checkpoint loaded on the CPU holds plain values.
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <npu/format_layout.h>

#include <string>
#include <unordered_map>

#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"

namespace at_npu::native {
namespace {

using Metadata = std::unordered_map<std::string, bool>;

std::string sizesKey(const char* name, c10::IntArrayRef sizes) {
  std::string key = name;
  for (int64_t s : sizes) key += "/" + std::to_string(s);
  return key + "/";
}

// "base_sizes_/2/3/" -> {2, 3}
std::vector<int64_t> parseSizes(const std::string& key) {
  std::vector<int64_t> sizes;
  size_t at = key.find('/');
  while (at != std::string::npos && at + 1 < key.size()) {
    const size_t next = key.find('/', at + 1);
    if (next == std::string::npos) break;
    sizes.push_back(std::stoll(key.substr(at + 1, next - at - 1)));
    at = next;
  }
  return sizes;
}

int64_t formatByName(const std::string& name) {
  for (int64_t f : {ACL_FORMAT_NCHW, ACL_FORMAT_NHWC, ACL_FORMAT_ND, ACL_FORMAT_NC1HWC0, ACL_FORMAT_FRACTAL_Z,
                    ACL_FORMAT_NDHWC, ACL_FORMAT_FRACTAL_NZ, ACL_FORMAT_NCDHW, ACL_FORMAT_NDC1HWC0,
                    ACL_FRACTAL_Z_3D}) {
    if (name == npu::formats::FormatName(f)) return f;
  }
  return -1;
}

void saveDesc(const at::Tensor& t, Metadata& metadata) {
  if (!t.has_storage()) return;
  const NPUStorageDesc* desc = privateDesc(t);
  if (desc == nullptr) return;
  const c10::IntArrayRef base(desc->base_sizes.data(), desc->base_sizes.size());
  metadata[sizesKey("base_sizes_", base)] = true;
  metadata[sizesKey("base_strides_", c10::IntArrayRef(desc->base_strides.data(), desc->base_strides.size()))] = true;
  metadata[sizesKey("storage_sizes_", base)] = true;  // what the file holds: the plain layout
  metadata[std::string("origin_format_/") + formatName(desc->origin_format)] = true;
  metadata[std::string("npu_format_/") + formatName(desc->npu_format)] = true;
  if (desc->c0 != npu::formats::DefaultC0(desc->npu_format, desc->data_type.itemsize())) {
    metadata["npu_c0_/" + std::to_string(desc->c0)] = true;
  }
}

void loadDesc(const at::Tensor& t, Metadata& metadata) {
  int64_t format = -1, c0 = 0;
  std::vector<int64_t> base;
  bool has_base = false;
  for (const auto& [key, value] : metadata) {
    if (key.rfind("npu_format_/", 0) == 0) format = formatByName(key.substr(12));
    if (key.rfind("npu_c0_/", 0) == 0) c0 = std::stoll(key.substr(8));
    if (key.rfind("base_sizes_/", 0) == 0) {
      base = parseSizes(key);
      has_base = true;
    }
  }
  if (!npu::formats::IsPrivateFormat(format) || t.device().type() != c10::DeviceType::PrivateUse1) return;
  if (!has_base) base = t.sizes().vec();
  if (c0 == 0) c0 = npu::formats::DefaultC0(format, t.element_size());
  auto desc = makeDesc(base, t.dtype(), format, c0);
  if (const NPUStorageDesc* current = privateDesc(t)) {
    if (current->npu_format == format && current->base_sizes == desc->base_sizes) return;  // shared storage, done
    unformatStorage(t.storage());
  }
  if (npuStorageImpl(t.storage()) == nullptr) return;  // not a torch_npu storage: the values stay plain
  formatStorage(t.storage(), std::move(desc));
}

struct RegisterFormatSerialization {
  RegisterFormatSerialization() {
    torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &saveDesc, &loadDesc);
  }
} register_format_serialization;

}  // namespace
}  // namespace at_npu::native

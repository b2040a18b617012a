// FormatBindings.cpp - torch_npu._C bindings behind torch_npu.get_npu_format, npu_format_cast_,
// get_storage_size and torch.npu.config.allow_internal_format.
#include "csrc/python/FormatBindings.h"

#include <ATen/ops/empty.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"

namespace torch_npu::python {

namespace py = pybind11;
using namespace at_npu::native;

void initFormatBindings(py::module_& m) {
  m.def("_npu_get_format", [](const at::Tensor& t) { return npuFormatOf(t); });
  m.def(
      "_npu_format_cast_",
      [](at::Tensor t, int64_t format, std::optional<int64_t> customize_dtype) {
        formatCastInPlace(t, format, customize_dtype);
        return t;
      },
      py::arg("self"), py::arg("acl_format"), py::arg("customize_dtype") = py::none());
  // Elements of the physical storage: the padded shape's product for a private format.
  m.def("_get_storage_size", [](const at::Tensor& t) -> int64_t {
    TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1,
                      "get_storage_size: expected an npu tensor, got one on ", t.device());
    if (const NPUStorageDesc* desc = privateDesc(t)) return desc->storageNumel();
    return static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  });
  // The storage description: {"npu_format", "origin_format", "base_sizes", "storage_sizes", "c0"}.
  m.def("_npu_storage_desc", [](const at::Tensor& t) {
    py::dict d;
    const int64_t format = npuFormatOf(t);
    d["npu_format"] = format;
    if (const NPUStorageDesc* desc = privateDesc(t)) {
      d["origin_format"] = desc->origin_format;
      d["base_sizes"] = std::vector<int64_t>(desc->base_sizes.begin(), desc->base_sizes.end());
      d["storage_sizes"] = std::vector<int64_t>(desc->storage_sizes.begin(), desc->storage_sizes.end());
      d["c0"] = desc->c0;
    } else {
      d["origin_format"] = format;
      d["base_sizes"] = t.sizes().vec();
      d["storage_sizes"] = t.sizes().vec();
      d["c0"] = 0;
    }
    return d;
  });
  // The physical bytes of a tensor's storage as they lie in device memory (a CPU uint8 tensor):
  // what tests compare with a reference of each layout.
  m.def("_npu_storage_bytes", [](const at::Tensor& t) {
    TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, "expected an npu tensor");
    const size_t n = t.storage().nbytes();
    at::Tensor host = at::empty({static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
    c10_npu::getCurrentNPUStream(t.device().index()).synchronize();
    if (n > 0) {
      NPU_CHECK(nrtMemcpy(host.data_ptr(), t.storage().data(), n, NRT_MEMCPY_DEVICE_TO_HOST));
    }
    return host;
  });
  m.def("_set_allow_internal_format", [](bool allow) { setAllowInternalFormat(allow); });
  m.def("_get_allow_internal_format", [] { return allowInternalFormat(); });
}

}  // namespace torch_npu::python

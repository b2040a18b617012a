// AccuracyBindings.cpp - torch_npu._C bindings of the accuracy tools: overflow detection and the
// ACL-style data dump of named device ops (torch_npu/npu/overflow.py, torch_npu/npu/dump.py).
#include <npu/opslib.h>
#include <npu/runtime.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "csrc/core/NPUException.h"
#include "csrc/python/AccuracyBindings.h"

namespace py = pybind11;

namespace torch_npu::python {

void initAccuracyBindings(py::module& m) {
  m.def("_set_overflow_detection", [](bool enable) { NPU_CHECK(nrtSetOverflowDetection(enable)); });
  m.def("_overflow_detection_enabled", [] { return nrtOverflowDetectionEnabled() != 0; });
  m.def("_dump_start", [](const std::string& path, int mode, const std::vector<std::string>& ops) {
    std::vector<const char*> names;
    for (const std::string& op : ops) names.push_back(op.c_str());
    if (aclnnDumpStart(path.c_str(), static_cast<aclnnDumpMode>(mode), names.data(), names.size()) !=
        ACLNN_SUCCESS) {
      throw std::runtime_error(aclnnGetRecentErrMsg());
    }
  });
  m.def("_dump_stop", [] {
    if (aclnnDumpStop() != ACLNN_SUCCESS) throw std::runtime_error(aclnnGetRecentErrMsg());
  });
  m.def("_dump_directory", [] { return std::string(aclnnDumpDirectory()); });
  m.def("_dump_file_count", [] { return aclnnDumpFileCount(); });
}

}  // namespace torch_npu::python

// HostMemoryBindings.h - bindings of the pinned host allocator's cache and statistics.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initHostMemoryBindings(py::module& m);

}  // namespace torch_npu::python

// MemorySnapshot.h - bindings of the caching allocator's memory history, snapshot and settings.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initMemoryBindings(py::module& m);

}  // namespace torch_npu::python

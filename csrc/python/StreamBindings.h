// StreamBindings.h - bindings of npu streams' runtime handles and of erase_stream.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initStreamBindings(py::module& m);

}  // namespace torch_npu::python

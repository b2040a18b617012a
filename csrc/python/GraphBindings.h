// GraphBindings.h - torch_npu._C bindings for compiled graphs (kernel launch, graph context, device ops).
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initGraphBindings(py::module& m);

}  // namespace torch_npu::python

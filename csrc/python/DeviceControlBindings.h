// DeviceControlBindings.h - bindings of the device controls: core limits, the op timeout, the
// expandable segments' address cache.
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initDeviceControlBindings(py::module& m);

}  // namespace torch_npu::python

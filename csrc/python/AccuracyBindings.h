// AccuracyBindings.h - registers the accuracy tools' bindings on torch_npu._C.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_npu::python {

void initAccuracyBindings(pybind11::module& m);

}  // namespace torch_npu::python

// FormatBindings.h - torch_npu._C bindings of the storage formats (FormatBindings.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_npu::python {

void initFormatBindings(pybind11::module_& m);

}  // namespace torch_npu::python

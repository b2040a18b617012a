// ProfilerBindings.h - torch_npu._C functions behind torch_npu.profiler.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_npu::python {

void initProfilerBindings(pybind11::module& m);

}  // namespace torch_npu::python

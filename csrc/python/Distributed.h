// Distributed.h - registers torch_npu._C._distributed (the hccl backend class).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_npu::python {

void initDistributedBindings(pybind11::module_& module);

}  // namespace torch_npu::python

// NPUGraphBindings.h - torch_npu._C's NPU graph names: _NPUGraph, _graph_pool_handle,
// _npu_isCurrentStreamCapturing and the private memory pool controls behind torch.npu.MemPool.
#pragma once

#include <torch/csrc/utils/pybind.h>

namespace torch_npu::python {

void initNPUGraphBindings(py::module& m);

}  // namespace torch_npu::python

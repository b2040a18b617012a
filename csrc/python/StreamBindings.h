// StreamBindings.h - bindings of npu streams' runtime handles and of erase_stream.
#pragma once

#include <c10/core/Stream.h>
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace torch_npu::python {

void initStreamBindings(py::module& m);

// The npu stream a Python Stream's (stream_id, device_index, device_type) name; `what` names the call
// in the error for another device type.
c10::Stream npuStreamArg(int64_t stream_id, int64_t device_index, int64_t device_type, const char* what);
// The reverse, for bindings that hand a stream to torch_npu.npu.Stream(**...).
py::tuple streamTuple(const c10::Stream& stream);

}  // namespace torch_npu::python

// StreamBindings.cpp - Stream.npu_stream (the runtime handle), the sync-launch stream, torch_npu.erase_stream
// and the sync debug mode for Python.
#include "csrc/python/StreamBindings.h"

#include <torch/csrc/utils/pybind.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUStream.h"
#include "csrc/core/NPUSyncDebug.h"

namespace torch_npu::python {

c10::Stream npuStreamArg(int64_t stream_id, int64_t device_index, int64_t device_type, const char* what) {
  const c10::Stream stream = c10::Stream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device_index),
                                                  static_cast<c10::DeviceType>(device_type));
  TORCH_CHECK_VALUE(stream.device_type() == c10::DeviceType::PrivateUse1, what, ": not an npu stream: ", stream);
  return stream;
}

py::tuple streamTuple(const c10::Stream& s) {
  return py::make_tuple(s.id(), s.device_index(), static_cast<int64_t>(s.device_type()));
}

void initStreamBindings(py::module& m) {
  m.def("_set_sync_debug_mode", &c10_npu::setSyncDebugMode);
  m.def("_get_sync_debug_mode", &c10_npu::syncDebugMode);
  // Stream.npu_stream: the runtime stream's handle (for extensions that launch work on it themselves).
  m.def("_stream_handle", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    const c10::Stream stream = npuStreamArg(stream_id, device_index, device_type, "npu_stream");
    return reinterpret_cast<uintptr_t>(c10_npu::NPUStream(stream).handle());
  });
  // torch.npu.SyncLaunchStream: the device's sync-launch stream as (stream_id, device_index, device_type).
  m.def("_sync_launch_stream", [](int64_t device) {
    return streamTuple(c10_npu::getSyncLaunchNPUStream(static_cast<c10::DeviceIndex>(device)).unwrap());
  });
  // The device's communication stream (collectives and point-to-point), as _sync_launch_stream gives it.
  m.def("_communication_stream", [](int64_t device) {
    return streamTuple(c10_npu::getCommunicationNPUStream(static_cast<c10::DeviceIndex>(device)).unwrap());
  });
  m.def("_erase_stream", [](const at::Tensor& tensor, int64_t stream_id, int64_t device_index, int64_t device_type) {
    TORCH_CHECK_VALUE(tensor.device().type() == c10::DeviceType::PrivateUse1,
                      "erase_stream: expected an npu tensor, got one on ", tensor.device());
    const c10::Stream stream = npuStreamArg(stream_id, device_index, device_type, "erase_stream");
    c10_npu::NPUCachingAllocator::eraseStream(tensor.storage().data_ptr(), c10_npu::NPUStream(stream));
  });
}

}  // namespace torch_npu::python

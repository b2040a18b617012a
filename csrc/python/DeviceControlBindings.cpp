// DeviceControlBindings.cpp - torch.npu's device controls for Python at torch_npu._C's upstream names:
// device / stream core limits (_npu_set_device_res_limit ...), the op timeout (_npu_set_op_timeout_ms,
// the runtime's watchdog) and _npu_emptyVirtAddrCache.
#include "csrc/python/DeviceControlBindings.h"
#include "csrc/python/StreamBindings.h"

#include <npu/runtime.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUResourceLimits.h"
#include "csrc/core/NPUStream.h"
#include "csrc/core/NPUThreadTeams.h"

namespace torch_npu::python {
namespace {

c10_npu::CoreKind coreKind(int64_t type) {
  TORCH_CHECK_VALUE(type == 0 || type == 1, "core limit type must be 0 (cube) or 1 (vector), got ", type);
  return static_cast<c10_npu::CoreKind>(type);
}

}  // namespace

void initDeviceControlBindings(py::module& m) {
  m.def("_npu_set_device_res_limit", [](int64_t device, int64_t type, int64_t value) {
    c10_npu::setDeviceCoreLimit(c10_npu::checked_device_index(device), coreKind(type), value);
  });
  m.def("_npu_get_device_res_limit", [](int64_t device, int64_t type) {
    return c10_npu::deviceCoreLimit(c10_npu::checked_device_index(device), coreKind(type));
  });
  m.def("_npu_set_stream_res_limit", [](int64_t stream_id, int64_t device_index, int64_t device_type, int64_t type,
                                        int64_t value) {
    c10_npu::setStreamCoreLimit(npuStreamArg(stream_id, device_index, device_type, "core limits"), coreKind(type), value);
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"), py::arg("type"), py::arg("value"));
  m.def("_npu_reset_stream_res_limit", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    c10_npu::resetStreamCoreLimits(npuStreamArg(stream_id, device_index, device_type, "core limits"));
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"));
  m.def("_npu_get_stream_res_limit", [](int64_t stream_id, int64_t device_index, int64_t device_type, int64_t type) {
    return c10_npu::streamCoreLimit(npuStreamArg(stream_id, device_index, device_type, "core limits"), coreKind(type));
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"), py::arg("type"));
  // The threads `stream`'s kernels get, as its worker sizes its team for the next task (tests).
  m.def("_stream_worker_threads", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    const c10_npu::NPUStream stream(npuStreamArg(stream_id, device_index, device_type, "core limits"));
    int threads = 0;
    NPU_CHECK(nrtLaunchHostFunc(stream.handle(), [](void* out) {
      *static_cast<int*>(out) = c10_npu::threadTeamSize();
      return 0;
    }, &threads));
    py::gil_scoped_release no_gil;
    NPU_CHECK(nrtStreamSynchronize(stream.handle()));
    return threads;
  });
  m.def("_npu_set_op_timeout_ms", [](uint64_t timeout_ms) { NPU_CHECK(nrtSetTaskTimeout(timeout_ms)); });
  m.def("_npu_get_op_timeout_ms", [] {
    uint64_t timeout_ms = 0;
    NPU_CHECK(nrtGetTaskTimeout(&timeout_ms));
    return timeout_ms;
  });
  m.def("_npu_emptyVirtAddrCache", [] {
    py::gil_scoped_release no_gil;  // waits for the devices
    c10_npu::NPUCachingAllocator::emptyVirtAddrCache();
  });
}

}  // namespace torch_npu::python

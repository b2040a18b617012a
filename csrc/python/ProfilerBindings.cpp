// ProfilerBindings.cpp - device activity of the last profiling session, for torch_npu.profiler's writers.
#include "csrc/python/ProfilerBindings.h"

#include <pybind11/stl.h>

#include "csrc/profiler/NPUActivityCollector.h"

namespace py = pybind11;

namespace torch_npu::python {

void initProfilerBindings(py::module& m) {
  // One tuple per device task of the last stopped session (times in Unix ns), in launch order:
  // (kind, device, stream, correlation_id, sequence, api_start, enqueue, start, end, bytes, memcpy_kind,
  //  block_dim, failed, launch_tid, name).
  m.def("_profiler_activities", [] {
    const auto records = torch_npu::profiler::NPUActivityCollector::get().records();
    py::list out;
    for (const auto& r : records) {
      out.append(py::make_tuple(r.kind, r.device, r.stream_id, r.correlation_id, r.sequence, r.api_start_ns,
                                r.enqueue_ns, r.start_ns, r.end_ns, r.bytes, r.memcpy_kind, r.block_dim,
                                r.failed != 0, r.launch_tid, std::string(r.name)));
    }
    return out;
  });
  // What went wrong while collecting them ("" if nothing): unfinished tasks, dropped records.
  m.def("_profiler_warning", [] { return torch_npu::profiler::NPUActivityCollector::get().warning(); });
  m.def("_profiler_recording", [] { return torch_npu::profiler::NPUActivityCollector::get().running(); });
}

}  // namespace torch_npu::python

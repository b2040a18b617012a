// HostMemoryBindings.cpp - the pinned host allocator's cache and statistics for Python
// (torch.npu.host_empty_cache / host_memory_stats / reset_*_host_memory_stats), and the runtime calls
// torch.npu.npurt() exposes as torch.cuda.cudart() does (host registration, raw streams).
#include "csrc/python/HostMemoryBindings.h"

#include <ATen/core/CachingHostAllocator.h>
#include <npu/runtime.h>

namespace torch_npu::python {
namespace {

at::HostAllocator* pinnedAllocator() { return at::getHostAllocator(at::kPrivateUse1); }

py::dict statDict(const c10::CachingAllocator::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

py::dict durationDict(const c10::CachingAllocator::DurationStat& s) {
  py::dict d;
  d["total"] = s.total;
  d["max"] = s.max;
  d["min"] = s.min;
  d["count"] = s.count;
  d["avg"] = s.count == 0 ? 0 : s.total / s.count;
  return d;
}

// Nested as torch.cuda.host_memory_stats_as_nested_dict() gives them.
py::dict hostMemoryStats() {
  const at::HostStats stats = pinnedAllocator()->get_stats();
  py::dict d;
  d["allocations"] = statDict(stats.allocations);
  d["allocated_bytes"] = statDict(stats.allocated_bytes);
  d["active_requests"] = statDict(stats.active_requests);
  d["active_bytes"] = statDict(stats.active_bytes);
  d["num_host_alloc"] = stats.num_host_alloc;
  d["num_host_free"] = stats.num_host_free;
  d["host_alloc_time"] = durationDict(stats.host_alloc_time);
  d["host_free_time"] = durationDict(stats.host_free_time);
  return d;
}

}  // namespace

void initHostMemoryBindings(py::module& m) {
  m.def("_host_memory_stats", &hostMemoryStats);
  m.def("_host_empty_cache", [] {
    py::gil_scoped_release no_gil;
    pinnedAllocator()->empty_cache();
  });
  m.def("_host_reset_accumulated_stats", [] { pinnedAllocator()->reset_accumulated_stats(); });
  m.def("_host_reset_peak_stats", [] { pinnedAllocator()->reset_peak_stats(); });

  // torch_npu._C._npurt: each call returns the runtime's error code (0 on success), as cudart's do;
  // pointers are passed as integers.
  py::module_ rt = m.def_submodule("_npurt", "runtime calls for torch.npu.npurt()");
  rt.def("npuHostRegister", [](uintptr_t ptr, size_t size, uint32_t flags) {
    return static_cast<int>(nrtHostRegister(reinterpret_cast<void*>(ptr), size, flags));
  }, py::arg("ptr"), py::arg("size"), py::arg("flags"));
  rt.def("npuHostUnregister", [](uintptr_t ptr) {
    return static_cast<int>(nrtHostUnregister(reinterpret_cast<void*>(ptr)));
  }, py::arg("ptr"));
  rt.def("npuStreamCreate", [](uintptr_t stream_out) {
    if (stream_out == 0) return static_cast<int>(NRT_ERROR_INVALID_VALUE);
    return static_cast<int>(nrtStreamCreate(reinterpret_cast<nrtStream_t*>(stream_out)));
  }, py::arg("stream_ptr"));
  rt.def("npuStreamDestroy", [](uintptr_t stream) {
    if (stream == 0) return static_cast<int>(NRT_ERROR_INVALID_VALUE);  // not the default stream
    py::gil_scoped_release no_gil;
    return static_cast<int>(nrtStreamDestroy(reinterpret_cast<nrtStream_t>(stream)));
  }, py::arg("stream"));
}

}  // namespace torch_npu::python

// HostMemoryBindings.cpp - the pinned host allocator's cache and statistics for Python
// (torch.npu.host_empty_cache / host_memory_stats / reset_*_host_memory_stats).
#include "csrc/python/HostMemoryBindings.h"

#include <ATen/core/CachingHostAllocator.h>

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
}

}  // namespace torch_npu::python

// NPUGraphBindings.cpp - NPU graphs (capture, replay, pools) and memory pools for Python.
#include "csrc/python/NPUGraphBindings.h"

#include <thread>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGraph.h"

namespace torch_npu::python {
namespace {

nrtCaptureMode captureMode(const std::string& mode) {
  if (mode == "global") return NRT_CAPTURE_MODE_GLOBAL;
  if (mode == "thread_local") return NRT_CAPTURE_MODE_THREAD_LOCAL;
  if (mode == "relaxed") return NRT_CAPTURE_MODE_RELAXED;
  TORCH_CHECK_VALUE(false, "capture_error_mode must be \"global\", \"thread_local\" or \"relaxed\", got \"", mode,
                    "\"");
}

c10::MempoolId_t poolId(const std::optional<std::tuple<uint64_t, uint64_t>>& pool) {
  if (!pool) return {0, 0};
  return {std::get<0>(*pool), std::get<1>(*pool)};
}

std::tuple<uint64_t, uint64_t> poolTuple(c10::MempoolId_t id) { return {id.first, id.second}; }

}  // namespace

void initNPUGraphBindings(py::module& m) {
  py::class_<c10_npu::NPUGraph>(m, "_NPUGraph")
      .def(py::init<>())
      .def("capture_begin",
           [](c10_npu::NPUGraph& self, const std::optional<std::tuple<uint64_t, uint64_t>>& pool,
              const std::string& capture_error_mode) { self.captureBegin(poolId(pool), captureMode(capture_error_mode)); },
           py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", &c10_npu::NPUGraph::captureEnd)
      .def("replay", &c10_npu::NPUGraph::replay)
      .def("reset", &c10_npu::NPUGraph::reset)
      .def("pool", [](const c10_npu::NPUGraph& self) { return poolTuple(self.pool()); })
      .def("enable_debug_mode", &c10_npu::NPUGraph::enableDebugMode)
      .def("debug_dump", &c10_npu::NPUGraph::debugDump, py::arg("debug_path"))
      .def("_task_count", &c10_npu::NPUGraph::taskCount);

  m.def("_graph_pool_handle", [] { return poolTuple(c10_npu::graphPoolHandle()); });
  m.def("_npu_isCurrentStreamCapturing", &c10_npu::currentStreamCapturing);

  // torch.npu.MemPool / use_mem_pool: a pool gains a user per MemPool object and per active route.
  m.def("_npu_retainPool", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    c10_npu::NPUCachingAllocator::retainPool(c10_npu::checked_device_index(device), poolId(pool));
  });
  m.def("_npu_beginAllocateCurrentThreadToPool", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    const std::thread::id me = std::this_thread::get_id();
    c10_npu::NPUCachingAllocator::beginAllocateToPool(c10_npu::checked_device_index(device), poolId(pool),
                                                      [me](nrtStream_t) { return std::this_thread::get_id() == me; });
  });
  m.def("_npu_endAllocateToPool", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    c10_npu::NPUCachingAllocator::endAllocateToPool(c10_npu::checked_device_index(device), poolId(pool));
  });
  m.def("_npu_releasePool", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    c10_npu::NPUCachingAllocator::releasePool(c10_npu::checked_device_index(device), poolId(pool));
  });
  m.def("_npu_poolUseCount", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    return c10_npu::NPUCachingAllocator::poolUseCount(c10_npu::checked_device_index(device), poolId(pool));
  });
}

}  // namespace torch_npu::python

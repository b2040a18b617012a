// NPUGraphBindings.cpp - NPU graphs (capture, replay, pools) and memory pools for Python.
#include "csrc/python/NPUGraphBindings.h"

#include <map>
#include <mutex>
#include <thread>

#include <npu/graph.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUGraph.h"
#include "csrc/core/NPUStream.h"
#include "csrc/python/StreamBindings.h"

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

nrtStream_t streamHandle(int64_t stream_id, int64_t device_index, int64_t device_type, const char* what) {
  return c10_npu::NPUStream(npuStreamArg(stream_id, device_index, device_type, what)).handle();
}

// A task group recorded in a capture, with the pool of the graph it belongs to: its updates allocate
// there, so that what the new tasks use lives as long as the graph.
struct TaskGroupHandle {
  nrtTaskGroup_t group = nullptr;
  c10::DeviceIndex device = -1;
  c10::MempoolId_t pool{0, 0};
};

// The update stream's allocations go to the group's pool while an update records (one at a time
// per stream).
std::mutex g_updates_mu;
std::map<nrtStream_t, TaskGroupHandle>* g_updates = new std::map<nrtStream_t, TaskGroupHandle>;  // leaked

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
      .def("_task_count", &c10_npu::NPUGraph::taskCount)
      .def("register_generator_state", &c10_npu::NPUGraph::registerGeneratorState, py::arg("generator"));

  m.def("_graph_pool_handle", [] { return poolTuple(c10_npu::graphPoolHandle()); });
  m.def("_npu_isCurrentStreamCapturing", &c10_npu::currentStreamCapturing);

  // Task groups (torch.npu.graph_task_group_* / graph_task_update_*).
  py::class_<TaskGroupHandle>(m, "_NPUTaskGroupHandle");
  m.def("_npu_graph_task_group_begin", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    NPU_CHECK(nrtStreamBeginTaskGroup(streamHandle(stream_id, device_index, device_type, "graph_task_group_begin")));
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"));
  m.def("_npu_graph_task_group_end", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    TaskGroupHandle handle;
    NPU_CHECK(nrtStreamEndTaskGroup(streamHandle(stream_id, device_index, device_type, "graph_task_group_end"),
                                    &handle.group));
    if (auto pool = c10_npu::capturingPool()) std::tie(handle.device, handle.pool) = *pool;
    return handle;
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"));
  m.def("_npu_graph_task_update_begin", [](int64_t stream_id, int64_t device_index, int64_t device_type,
                                           const TaskGroupHandle& handle) {
    nrtStream_t stream = streamHandle(stream_id, device_index, device_type, "graph_task_update_begin");
    NPU_CHECK(nrtStreamBeginTaskUpdate(stream, handle.group));
    if (handle.device >= 0) {
      c10_npu::NPUCachingAllocator::beginAllocateToPool(handle.device, handle.pool,
                                                        [stream](nrtStream_t s) { return s == stream; });
    }
    std::lock_guard<std::mutex> lock(g_updates_mu);
    (*g_updates)[stream] = handle;
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"), py::arg("handle"));
  m.def("_npu_graph_task_update_end", [](int64_t stream_id, int64_t device_index, int64_t device_type) {
    nrtStream_t stream = streamHandle(stream_id, device_index, device_type, "graph_task_update_end");
    std::optional<TaskGroupHandle> handle;
    {
      std::lock_guard<std::mutex> lock(g_updates_mu);
      if (auto it = g_updates->find(stream); it != g_updates->end()) {
        handle = it->second;
        g_updates->erase(it);
      }
    }
    if (handle && handle->device >= 0) {
      c10_npu::NPUCachingAllocator::endAllocateToPool(handle->device, handle->pool);
      c10_npu::NPUCachingAllocator::releasePool(handle->device, handle->pool);  // the route's hold
    }
    NPU_CHECK(nrtStreamEndTaskUpdate(stream));
  }, py::arg("stream_id"), py::arg("device_index"), py::arg("device_type"));

  // External events (torch.npu.ExternalEvent): flags recorded, waited for and reset in stream order.
  m.def("_npu_external_event_create", [] {
    nrtEvent_t event = nullptr;
    NPU_CHECK(nrtEventCreateExternal(&event));
    return reinterpret_cast<uintptr_t>(event);
  });
  m.def("_npu_external_event_destroy", [](uintptr_t event) { nrtEventDestroy(reinterpret_cast<nrtEvent_t>(event)); });
  m.def("_npu_external_event_record", [](uintptr_t event, int64_t stream_id, int64_t device_index, int64_t device_type) {
    NPU_CHECK(nrtEventRecord(reinterpret_cast<nrtEvent_t>(event),
                             streamHandle(stream_id, device_index, device_type, "ExternalEvent.record")));
  });
  m.def("_npu_external_event_wait", [](uintptr_t event, int64_t stream_id, int64_t device_index, int64_t device_type) {
    NPU_CHECK(nrtStreamWaitEvent(streamHandle(stream_id, device_index, device_type, "ExternalEvent.wait"),
                                 reinterpret_cast<nrtEvent_t>(event)));
  });
  m.def("_npu_external_event_reset", [](uintptr_t event, int64_t stream_id, int64_t device_index, int64_t device_type) {
    NPU_CHECK(nrtEventResetAsync(reinterpret_cast<nrtEvent_t>(event),
                                 streamHandle(stream_id, device_index, device_type, "ExternalEvent.reset")));
  });
  m.def("_npu_external_event_query", [](uintptr_t event) {
    return nrtEventQuery(reinterpret_cast<nrtEvent_t>(event)) == NRT_SUCCESS;
  });

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
    c10_npu::releasePoolUser(c10_npu::checked_device_index(device), poolId(pool));
  });
  m.def("_npu_poolUseCount", [](int64_t device, std::tuple<uint64_t, uint64_t> pool) {
    return c10_npu::NPUCachingAllocator::poolUseCount(c10_npu::checked_device_index(device), poolId(pool));
  });
}

}  // namespace torch_npu::python

// Module.cpp - torch_npu._C: loading it registers the npu device with PyTorch (guard, allocator, hooks,
// kernels live in libtorch_npu); these bindings serve the torch.npu Python module.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <npu/opslib.h>
#include <torch/csrc/Generator.h>

#include "csrc/core/NPUBlockingWait.h"
#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUDeviceInfo.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/core/NPUThreadTeams.h"
#include "csrc/core/NPUTrace.h"
#include "csrc/framework/DeferredRelease.h"
#include "csrc/framework/FaultOrigins.h"
#include "opslib/aten/HostCache.h"
#include "csrc/framework/OpStats.h"
#include "csrc/python/Distributed.h"
#include "csrc/python/AccuracyBindings.h"
#include "csrc/python/FormatBindings.h"
#include "csrc/python/DeviceControlBindings.h"
#include "csrc/python/NPUGraphBindings.h"
#include "csrc/python/GraphBindings.h"
#include "csrc/python/LaunchSite.h"
#include "csrc/python/ProfilerBindings.h"
#include "csrc/python/HostMemoryBindings.h"
#include "csrc/python/StreamBindings.h"
#include "csrc/python/MemorySnapshot.h"

namespace py = pybind11;

namespace {
bool pythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// A blocking device wait lets go of the GIL if this thread holds it (csrc/core/NPUBlockingWait.h).
void* releaseGilForWait() {
  if (!Py_IsInitialized() || pythonFinalizing() || !PyGILState_Check()) return nullptr;
  return PyEval_SaveThread();
}

void restoreGilAfterWait(void* state) { PyEval_RestoreThread(static_cast<PyThreadState*>(state)); }
}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_npu native bindings (software NPU)";
  torch_npu::python::installLaunchSiteProvider();
  c10_npu::setBlockingWaitHooks(&releaseGilForWait, &restoreGilAfterWait);
  // A runtime that cannot start for a reason of the user's making (a malformed NPU_SIM_FAULT) fails
  // the import, so that nothing runs as if the faults were injected.
  if (nrtInit() != NRT_SUCCESS) {
    const std::string message = nrtGetRecentErrMsg();
    if (message.find("NPU_SIM_FAULT") != std::string::npos) throw std::runtime_error(message);
  }
  at_npu::native::installFaultOrigins();
  c10_npu::installHostThreads();
  npu_opslib_aten_install_host_cache();
  // A Python thread may take the GIL for a trace notification, unless it holds it with an exception
  // pending (a temporary freed while an error propagates): the notification would clobber it.
  c10_npu::trace::setPythonThreadCheck([] {
    if (!Py_IsInitialized() || PyGILState_GetThisThreadState() == nullptr) return false;
    return !(PyGILState_Check() && PyErr_Occurred() != nullptr);
  });
  torch_npu::python::initDistributedBindings(m);
  torch_npu::python::initProfilerBindings(m);
  torch_npu::python::initAccuracyBindings(m);
  torch_npu::python::initMemoryBindings(m);
  torch_npu::python::initHostMemoryBindings(m);
  torch_npu::python::initStreamBindings(m);
  torch_npu::python::initFormatBindings(m);
  torch_npu::python::initGraphBindings(m);
  torch_npu::python::initDeviceControlBindings(m);
  torch_npu::python::initNPUGraphBindings(m);
  // What device tasks kept alive is released on a thread of its own (csrc/framework/DeferredRelease.h).
  m.def("_drain_releases", [](bool stop) {
    py::gil_scoped_release no_gil;  // the release thread may need it
    at_npu::native::drainReleases(stop);
  }, py::arg("stop") = false);
  m.def("_unmatched_faults", [] { return at_npu::native::unmatchedFaults(); });
  m.def("_host_cache_stats", [] {
    size_t cached = 0, in_use = 0, hits = 0, misses = 0;
    npu_opslib_aten_host_cache_stats(&cached, &in_use, &hits, &misses);
    py::dict d;
    d["cached_bytes"] = cached;
    d["in_use_bytes"] = in_use;
    d["hits"] = hits;
    d["misses"] = misses;
    size_t in_place = 0, by_copy = 0;
    npu_opslib_aten_result_store_counts(&in_place, &by_copy);
    d["results_in_place"] = in_place;
    d["results_copied"] = by_copy;
    return d;
  });
  m.def("_release_counts", [] { return at_npu::native::releaseCounts(); });
  m.def("_set_npu_trace_enabled", [](bool enabled) { c10_npu::trace::setEnabled(enabled); });
  m.def("_op_stats", [] {
    py::dict out;
    for (const auto& [name, v] : at_npu::native::opStatsSnapshot()) {
      py::dict d;
      d["device_op"] = v[0];
      d["generic"] = v[1];
      d["generic_inline"] = v[2];
      d["fallback"] = v[3];
      out[py::str(name)] = d;
    }
    return out;
  });
  m.def("_device_ops", [] {
    py::list names;
    for (int i = 0; i < aclnnOpCount(); ++i) names.append(py::str(aclnnOpAt(i)->name));
    return names;
  });
  m.def("_reset_op_stats", [] { at_npu::native::resetOpStats(); });
  m.def("_device_count", [] { return static_cast<int>(c10_npu::device_count()); });
  m.def("_npu_getDeviceCount", [] { return static_cast<int>(c10_npu::device_count()); });  // torch_npu's name
  m.def("_current_device", [] { return static_cast<int>(c10_npu::current_device()); });
  m.def("_set_device", [](int64_t device) { c10_npu::set_device(c10_npu::checked_device_index(device)); });
  m.def("_check_device", [](int64_t device) { c10_npu::checked_device_index(device); });
  m.def("_synchronize", [](int64_t device) {
    const c10::DeviceIndex index = c10_npu::checked_device_index(device);
    py::gil_scoped_release no_gil;
    c10_npu::device_synchronize(index);
  });
  // "ok", or "lost" once an injected device_lost fault (NPU_SIM_FAULT) took the device.
  m.def("_get_device_status", [](int64_t device) {
    nrtDeviceStatus status = NRT_DEVICE_OK;
    NPU_CHECK(nrtGetDeviceStatus(static_cast<int32_t>(c10_npu::checked_device_index(device)), &status));
    return std::string(status == NRT_DEVICE_LOST ? "lost" : "ok");
  });
  m.def("_default_generator", [](int device) {
    const at::Generator& gen = c10_npu::getDefaultNPUGenerator(static_cast<c10::DeviceIndex>(device));
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(gen));
  });
  m.def("_set_memory_fraction", [](double fraction, int device) {
    c10_npu::NPUCachingAllocator::setMemoryFraction(fraction, static_cast<c10::DeviceIndex>(device));
  });
  // torch.Event.elapsed_time rejects subclasses as `other`, so torch.npu.Event times through here.
  m.def("_event_elapsed_time", [](int64_t start, int64_t end) {
    TORCH_CHECK(start != 0 && end != 0, "elapsed_time: both events must have been recorded");
    float ms = 0;
    NPU_CHECK(nrtEventElapsedTime(&ms, reinterpret_cast<nrtEvent_t>(start),
                                  reinterpret_cast<nrtEvent_t>(end)));
    return static_cast<double>(ms);
  });
  m.def("_event_recorded_time", [](int64_t event) {
    TORCH_CHECK(event != 0, "recorded_time: the event was never recorded; call record() first");
    uint64_t us = 0;
    NPU_CHECK(nrtEventGetTimestamp(reinterpret_cast<nrtEvent_t>(event), &us));
    return us;
  });
  m.def("_utilization", [](int device) {
    int32_t percent = 0;
    NPU_CHECK(nrtGetDeviceUtilization(device, &percent));
    return percent;
  });
  m.def("_get_soc_name", [] { return c10_npu::GetSocName(); });
  m.def("_get_soc_version", [] { return static_cast<int>(c10_npu::GetSocVersion()); });
  m.def("_is_support_inf_nan", [] { return c10_npu::IsSupportInfNan(); });
  m.def("_is_bf16_supported", [] { return c10_npu::IsBF16Supported(); });
  m.def("_get_cann_version", [] { return c10_npu::GetCannVersion(); });
  m.def("_is_gte_cann_version", [](const std::string& version) { return c10_npu::IsGteCannVersion(version); });
  m.def("_get_device_properties", [](int device) {
    nrtDeviceProp prop;
    NPU_CHECK(nrtGetDeviceProperties(device, &prop));
    return py::make_tuple(std::string(prop.name), prop.total_memory, prop.cube_core_num, prop.vector_core_num);
  });
  m.def("_set_option", [](const std::string& name, const std::string& value) {
    c10_npu::option::SetOption(name, value);
  });
  m.def("_get_option", [](const std::string& name) { return c10_npu::option::GetOption(name); });
  m.def("_end_training_step", [] { c10_npu::NPUCachingAllocator::endTrainingStep(); });
  m.def("_step_plan_stats", [](int device) {
    const auto s = c10_npu::NPUCachingAllocator::stepPlanStats(static_cast<c10::DeviceIndex>(device));
    py::dict d;
    d["steps"] = s.steps;
    d["plans"] = s.plans;
    d["planned_steps"] = s.planned_steps;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    return d;
  });
  m.def("_memory_summary_short", [](int device) {
    return c10_npu::NPUCachingAllocator::memorySummary(static_cast<c10::DeviceIndex>(device));
  });
}

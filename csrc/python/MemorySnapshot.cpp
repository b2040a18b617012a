// MemorySnapshot.cpp - torch.npu.memory._record_memory_history / _snapshot and the allocator
// settings: the caching allocator's history as the dictionary PyTorch's memory visualiser reads.
#include "csrc/python/MemorySnapshot.h"

#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <optional>
#include <string>
#include <unordered_map>

#include "csrc/core/NPUAllocatorConfig.h"
#include "csrc/core/NPUCachingAllocator.h"

// From libtorch_python (torch/csrc/profiler/python/combined_traceback.h, whose nlohmann include
// the wheel does not ship): tracebacks to lists of {"filename", "line", "name"} frames.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void freeDeadCapturedTracebackFrames();
}  // namespace torch

namespace torch_npu::python {
namespace {

namespace alloc = c10_npu::NPUCachingAllocator;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;

std::shared_ptr<c10::GatheredContext> gatherPython() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/false);
}

std::shared_ptr<c10::GatheredContext> gatherWithCpp() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/true);
}

void recordMemoryHistory(std::optional<std::string> enabled, std::optional<std::string> context,
                         const std::string& stacks, size_t max_entries, bool clear_history) {
  TORCH_CHECK_VALUE(!enabled || *enabled == "state" || *enabled == "all",
                    "expected enabled to be 'state', 'all', or None, got '", *enabled, "'");
  TORCH_CHECK_VALUE(!context || *context == "state" || *context == "alloc" || *context == "all",
                    "expected context to be 'state', 'alloc', 'all', or None, got '", *context, "'");
  TORCH_CHECK_VALUE(stacks == "python" || stacks == "all",
                    "expected stacks to be 'python' or 'all', got '", stacks, "'");
  RecordContext when = RecordContext::NEVER;
  if (context == "state") when = RecordContext::STATE;
  if (context == "alloc") when = RecordContext::ALLOC;
  if (context == "all") when = RecordContext::ALL;
  // 'state' keeps only what is live now: no event history.
  const size_t entries = (enabled && *enabled == "all") ? max_entries : 0;
  alloc::recordHistory(enabled.has_value(), stacks == "all" ? &gatherWithCpp : &gatherPython, entries,
                       when, clear_history);
}

const char* actionName(TraceEntry::Action action) {
  switch (action) {
    case TraceEntry::ALLOC: return "alloc";
    case TraceEntry::FREE_REQUESTED: return "free_requested";
    case TraceEntry::FREE_COMPLETED: return "free_completed";
    case TraceEntry::SEGMENT_ALLOC: return "segment_alloc";
    case TraceEntry::SEGMENT_FREE: return "segment_free";
    case TraceEntry::SEGMENT_MAP: return "segment_map";
    case TraceEntry::SEGMENT_UNMAP: return "segment_unmap";
    case TraceEntry::SNAPSHOT: return "snapshot";
    case TraceEntry::OOM: return "oom";
  }
  return "unknown";
}

// Frames are attached once all contexts are known, so that one symbolisation serves them all.
class FrameAttacher {
 public:
  void add(py::dict& d, const std::shared_ptr<c10::GatheredContext>& context) {
    auto* traceback = dynamic_cast<torch::CapturedTraceback*>(context.get());
    if (traceback == nullptr) {
      d["frames"] = py::list();
      return;
    }
    tracebacks_.push_back(traceback);
    dicts_.push_back(d);
  }
  void attach() {
    std::vector<py::object> frames = torch::py_symbolize(tracebacks_);
    for (size_t i = 0; i < frames.size(); ++i) dicts_[i]["frames"] = frames[i];
  }

 private:
  std::vector<torch::CapturedTraceback*> tracebacks_;
  std::vector<py::dict> dicts_;
};

py::dict memorySnapshot() {
  alloc::SnapshotInfo snapshot;
  {
    py::gil_scoped_release no_gil;  // gathering stacks elsewhere may need the GIL
    snapshot = alloc::snapshot();
  }
  torch::freeDeadCapturedTracebackFrames();
  FrameAttacher frames;
  py::list segments;
  for (const auto& s : snapshot.segments) {
    py::dict segment;
    segment["device"] = s.device;
    segment["address"] = s.address;
    segment["total_size"] = s.total_size;
    segment["allocated_size"] = s.allocated_size;
    segment["active_size"] = s.active_size;
    segment["requested_size"] = s.requested_size;
    segment["stream"] = reinterpret_cast<int64_t>(s.stream);
    segment["segment_type"] = s.is_large ? "large" : "small";
    segment["segment_pool_id"] = py::make_tuple(s.owner_private_pool_id.first, s.owner_private_pool_id.second);
    segment["is_expandable"] = s.is_expandable;
    frames.add(segment, s.context_when_allocated);
    py::list blocks;
    size_t address = s.address;
    for (const auto& b : s.blocks) {
      py::dict block;
      block["address"] = address;
      block["size"] = b.size;
      block["requested_size"] = b.requested_size;
      block["state"] = b.allocated ? "active_allocated" : (b.active ? "active_pending_free" : "inactive");
      frames.add(block, b.context_when_allocated);
      blocks.append(block);
      address += b.size;
    }
    segment["blocks"] = blocks;
    segments.append(segment);
  }
  py::list traces;
  for (const auto& device_trace : snapshot.device_traces) {
    py::list trace;
    for (const auto& e : device_trace) {
      py::dict entry;
      entry["action"] = actionName(e.action_);
      entry[e.action_ == TraceEntry::OOM ? "device_free" : "addr"] = e.addr_;
      entry["size"] = e.size_;
      entry["stream"] = reinterpret_cast<int64_t>(e.stream_);
      entry["time_us"] = static_cast<int64_t>(e.time_.t_);
      frames.add(entry, e.context_);
      trace.append(entry);
    }
    traces.append(trace);
  }
  frames.attach();
  const alloc::AllocatorSettings& cfg = alloc::allocatorSettings();
  py::dict settings;
  settings["PYTORCH_NPU_ALLOC_CONF"] = cfg.text;
  settings["max_split_size"] = cfg.max_split_size == static_cast<size_t>(-1)
                                   ? int64_t{-1} : static_cast<int64_t>(cfg.max_split_size);
  settings["garbage_collection_threshold"] = cfg.garbage_collection_threshold;
  settings["expandable_segments"] = cfg.expandable_segments;
  py::dict roundup;
  for (size_t i = 0; i < cfg.roundup_power2_divisions.size(); ++i) {
    roundup[py::str(std::to_string(size_t{1} << i))] = cfg.roundup_power2_divisions[i];
  }
  settings["roundup_power2_divisions"] = roundup;
  py::dict result;
  result["segments"] = segments;
  result["device_traces"] = traces;
  result["allocator_settings"] = settings;
  return result;
}

}  // namespace

void initMemoryBindings(py::module& m) {
  m.def("_record_memory_history", &recordMemoryHistory, py::arg("enabled"), py::arg("context"),
        py::arg("stacks"), py::arg("max_entries"), py::arg("clear_history"));
  m.def("_memory_snapshot", &memorySnapshot);
  auto setSettings = [](const std::string& settings) {
    torch::PyWarningHandler warnings;  // the settings' warnings become Python UserWarnings
    try {
      alloc::setAllocatorSettings(settings);
    } catch (...) {
      warnings.set_in_exception();
      throw;
    }
  };
  m.def("_set_allocator_settings", setSettings);
  m.def("_npu_npuCachingAllocator_set_allocator_settings", setSettings);  // torch_npu's name
  m.def("_get_allocator_settings", [] { return alloc::allocatorSettings().text; });
  m.def("_npu_oomRejections", [](c10::DeviceIndex device) { return alloc::oomRejections(device); });
}

}  // namespace torch_npu::python

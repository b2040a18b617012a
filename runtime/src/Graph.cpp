// Graph.cpp - the C API of npu/graph.h: beginning and ending captures, recorded launches, and
// replaying, dumping and destroying graphs.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "Activity.h"
#include "Capture.h"
#include "Error.h"
#include "HandleTable.h"
#include "Log.h"
#include "Runtime.h"
#include "Stream.h"
#include "StreamRegistry.h"
#include "npu/graph.h"

struct nrtGraphImpl {
  std::shared_ptr<npu::runtime::Graph> graph;
};

struct nrtTaskGroupImpl {
  std::weak_ptr<npu::runtime::TaskGroup> group;  // lives with its graph
};

namespace npu::runtime {
namespace {

std::atomic<uint64_t> g_next_capture_id{1};

// Live graph handles: a destroyed or foreign handle is refused instead of dereferenced.
std::mutex g_graphs_mu;
std::unordered_set<nrtGraphImpl*>* g_graphs = new std::unordered_set<nrtGraphImpl*>;  // leaked

nrtError_t ResolveGraph(const char* api, nrtGraph_t handle, std::shared_ptr<Graph>* graph) {
  std::lock_guard<std::mutex> lock(g_graphs_mu);
  if (handle == nullptr || g_graphs->count(handle) == 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, api, ": graph ", static_cast<const void*>(handle),
                       " is not a live graph (never created, or already destroyed)");
  }
  *graph = handle->graph;
  return NRT_SUCCESS;
}

// Task group handles, kept for the process (a few per graph): a handle whose graph is gone is refused.
std::mutex g_groups_mu;
std::unordered_set<nrtTaskGroupImpl*>* g_groups = new std::unordered_set<nrtTaskGroupImpl*>;  // leaked

nrtError_t ResolveGroup(const char* api, nrtTaskGroup_t handle, std::shared_ptr<TaskGroup>* group) {
  std::lock_guard<std::mutex> lock(g_groups_mu);
  if (handle == nullptr || g_groups->count(handle) == 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, api, ": task group ", static_cast<const void*>(handle),
                       " was not returned by nrtStreamEndTaskGroup");
  }
  *group = handle->group.lock();
  if (!*group) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, api, ": the graph of task group ", static_cast<const void*>(handle),
                       " was destroyed (or its capture failed)");
  }
  return NRT_SUCCESS;
}

}  // namespace

std::optional<nrtError_t> RecordLaunch(Stream& stream, GraphNode&& node) {
  std::shared_ptr<Capture> capture = stream.capture();
  if (!capture) return std::nullopt;  // the capture ended meanwhile: queue it
  return capture->Add(stream, std::move(node));
}

}  // namespace npu::runtime

using npu::runtime::Capture;
using npu::runtime::Graph;
using npu::runtime::GraphNode;
using npu::runtime::Runtime;
using npu::runtime::Stream;
using StreamPtr = std::shared_ptr<Stream>;

extern "C" {

nrtError_t nrtStreamBeginCapture(nrtStream_t stream, nrtCaptureMode mode) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (mode != NRT_CAPTURE_MODE_GLOBAL && mode != NRT_CAPTURE_MODE_THREAD_LOCAL &&
        mode != NRT_CAPTURE_MODE_RELAXED) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamBeginCapture: unknown capture mode ",
                         static_cast<int>(mode), " (0 global, 1 thread_local, 2 relaxed)");
    }
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    if (found->is_default()) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginCapture: ", found->name(),
                         " is the default stream, which cannot capture; capture on a stream of your own "
                         "(torch.npu.graph uses a side stream by default)");
    }
    if (found->capturing()) {
      std::shared_ptr<Capture> current = found->capture();
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginCapture: ", found->name(),
                         " is already capturing (capture #", current ? current->id() : 0,
                         "); end that capture first");
    }
    auto capture = std::make_shared<Capture>(npu::runtime::g_next_capture_id.fetch_add(1), mode, found);
    npu::runtime::CaptureStarted(capture);
    found->SetCapture(capture);
    NPU_RT_LOG(kInfo, "capture #", capture->id(), " began on ", found->name());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamEndCapture(nrtStream_t stream, nrtGraph_t* graph) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (graph == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamEndCapture: graph is NULL");
    *graph = nullptr;
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    std::shared_ptr<Capture> capture = found->capture();
    if (!capture) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamEndCapture: ", found->name(), " is not capturing");
    }
    if (capture->origin() != found->id()) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamEndCapture: ", found->name(),
                         " joined capture #", capture->id(), " through an event; end it on the stream that began "
                         "it (stream #", capture->origin(), ")");
    }
    std::vector<GraphNode> nodes;
    if (nrtError_t error = capture->End(&nodes)) return error;
    auto recorded = std::make_shared<Graph>(capture->id(), capture->device(), std::move(nodes));
    auto handle = std::make_unique<nrtGraphImpl>(nrtGraphImpl{std::move(recorded)});
    {
      std::lock_guard<std::mutex> lock(npu::runtime::g_graphs_mu);
      npu::runtime::g_graphs->insert(handle.get());
    }
    NPU_RT_LOG(kInfo, "capture #", capture->id(), " ended on ", found->name(), " with ",
               handle->graph->nodes().size(), " tasks");
    *graph = handle.release();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamGetCaptureInfo(nrtStream_t stream, nrtCaptureStatus* status, uint64_t* capture_id) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (status == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamGetCaptureInfo: status is NULL");
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) return error;
    *status = NRT_CAPTURE_STATUS_NONE;
    if (capture_id != nullptr) *capture_id = 0;
    if (!found->capturing()) return NRT_SUCCESS;
    std::shared_ptr<Capture> capture = found->capture();
    if (!capture) return NRT_SUCCESS;
    *status = NRT_CAPTURE_STATUS_ACTIVE;
    if (capture_id != nullptr) *capture_id = capture->id();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtGraphLaunch(nrtGraph_t graph, nrtStream_t stream, const uint64_t* replay_seeds, size_t count) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    std::shared_ptr<Graph> found_graph;
    if (nrtError_t error = npu::runtime::ResolveGraph("nrtGraphLaunch", graph, &found_graph)) return error;
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) return error;
    if (found->device() != found_graph->device()) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphLaunch: graph #", found_graph->id(),
                         " was captured on npu:", found_graph->device(), " and cannot replay on ", found->name());
    }
    if (found->capturing()) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtGraphLaunch: ", found->name(),
                         " is capturing; replaying a graph inside another capture is not supported");
    }
    if (count > 0 && replay_seeds == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphLaunch: replay_seeds is NULL but count is ", count);
    }
    if (npu::runtime::activity::Active()) {
      npu::runtime::activity::LabelTask(NRT_ACTIVITY_HOST_TASK,
                                        npu::runtime::StrCat("graph launch #", found_graph->id()).c_str());
    }
    struct Launch {
      std::shared_ptr<Graph> graph;
      std::vector<uint64_t> seeds;
    };
    auto launch = std::make_shared<Launch>(Launch{std::move(found_graph), {}});
    if (count > 0) launch->seeds.assign(replay_seeds, replay_seeds + count);
    return found->Enqueue([launch = std::move(launch), found] {
      std::optional<std::string> failure = found->RunGraph(*launch->graph, launch->seeds);
      if (!failure) return 0;
      nrtSetTaskErrMsg(failure->c_str());
      return 1;
    }, false, "graph launch");
  });
}

nrtError_t nrtStreamBeginTaskGroup(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    std::shared_ptr<Capture> capture = found->capture();
    if (!capture || capture->update_target) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginTaskGroup: ", found->name(),
                         " is not capturing; task groups are recorded inside a capture");
    }
    return capture->BeginGroup(*found);
  });
}

nrtError_t nrtStreamEndTaskGroup(nrtStream_t stream, nrtTaskGroup_t* group) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (group == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamEndTaskGroup: group is NULL");
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    std::shared_ptr<Capture> capture = found->capture();
    if (!capture || capture->update_target) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamEndTaskGroup: ", found->name(), " is not capturing");
    }
    std::shared_ptr<npu::runtime::TaskGroup> recorded;
    if (nrtError_t error = capture->EndGroup(*found, &recorded)) return error;
    auto handle = std::make_unique<nrtTaskGroupImpl>(nrtTaskGroupImpl{recorded});
    std::lock_guard<std::mutex> lock(npu::runtime::g_groups_mu);
    npu::runtime::g_groups->insert(handle.get());
    *group = handle.release();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamBeginTaskUpdate(nrtStream_t stream, nrtTaskGroup_t group) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    std::shared_ptr<npu::runtime::TaskGroup> target;
    if (nrtError_t error = npu::runtime::ResolveGroup("nrtStreamBeginTaskUpdate", group, &target)) return error;
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    if (found->capturing()) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginTaskUpdate: ", found->name(),
                         " is capturing (or already recording an update); update from a stream of its own");
    }
    if (found->is_default()) {
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginTaskUpdate: ", found->name(),
                         " is the default stream; record updates on a stream of your own");
    }
    // Recorded like a relaxed capture: other threads' synchronising calls are not affected.
    auto capture = std::make_shared<Capture>(npu::runtime::g_next_capture_id.fetch_add(1), NRT_CAPTURE_MODE_RELAXED,
                                             found);
    capture->update_target = std::move(target);
    npu::runtime::CaptureStarted(capture);
    found->SetCapture(capture);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamEndTaskUpdate(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    std::shared_ptr<Capture> capture = found->capture();
    if (!capture || !capture->update_target) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamEndTaskUpdate: ", found->name(),
                         " is not recording a task update (call nrtStreamBeginTaskUpdate first)");
    }
    std::vector<GraphNode> nodes;
    if (nrtError_t error = capture->End(&nodes)) return error;
    auto fresh = std::make_shared<std::vector<GraphNode>>(std::move(nodes));
    // In stream order: replays ordered after this point (by an event) run the new tasks.
    return found->Enqueue([group = capture->update_target, fresh] {
      group->Swap(std::move(*fresh));
      fresh->clear();
      return 0;
    }, false, "task group update");
  });
}

nrtError_t nrtGraphDestroy(nrtGraph_t graph) {
  {
    std::lock_guard<std::mutex> lock(npu::runtime::g_graphs_mu);
    if (graph == nullptr || npu::runtime::g_graphs->erase(graph) == 0) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, "nrtGraphDestroy: graph ", static_cast<const void*>(graph),
                         " is not a live graph (never created, or already destroyed)");
    }
  }
  delete graph;  // queued replays hold the graph itself until they finish
  return NRT_SUCCESS;
}

nrtError_t nrtGraphGetNodeCount(nrtGraph_t graph, size_t* count) {
  if (count == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphGetNodeCount: count is NULL");
  std::shared_ptr<Graph> found;
  if (nrtError_t error = npu::runtime::ResolveGraph("nrtGraphGetNodeCount", graph, &found)) return error;
  *count = found->nodes().size();
  return NRT_SUCCESS;
}

nrtError_t nrtGraphDebugDump(nrtGraph_t graph, const char* path) {
  if (path == nullptr || *path == '\0') {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphDebugDump: path is NULL or empty");
  }
  std::shared_ptr<Graph> found;
  if (nrtError_t error = npu::runtime::ResolveGraph("nrtGraphDebugDump", graph, &found)) return error;
  std::FILE* file = std::fopen(path, "w");
  if (file == nullptr) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphDebugDump: cannot open ", path, " for writing");
  }
  std::fprintf(file, "graph #%llu on npu:%d, %zu tasks\n", static_cast<unsigned long long>(found->id()),
               found->device(), found->nodes().size());
  size_t index = 0;
  for (const GraphNode& node : found->nodes()) {
    std::fprintf(file, "%zu\t%s\t%s\tstream #%llu\t%s\n", index++, node.kind, node.name ? node.name : "host task",
                 static_cast<unsigned long long>(node.stream_id), node.site ? node.site : "");
  }
  const bool ok = std::fclose(file) == 0;
  if (!ok) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtGraphDebugDump: writing ", path, " failed");
  return NRT_SUCCESS;
}

}  // extern "C"

// NPUGraph.h - torch.npu.NPUGraph: the work launched on the current stream captured into a graph that
// replays it, with a private memory pool and fresh random numbers per replay.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <utility>

#include <npu/graph.h>

namespace c10_npu {

// A fresh id for a memory pool that graphs share (torch.npu.graph_pool_handle()).
c10::MempoolId_t graphPoolHandle();
// True while any NPUGraph of this process is capturing: launch policies that synchronise after each
// op (TASK_QUEUE_ENABLE=0, ASCEND_LAUNCH_BLOCKING=1, SyncLaunchStream) queue instead meanwhile.
bool anyCaptureUnderway();
// torch.npu.is_current_stream_capturing().
bool currentStreamCapturing();
// The pool of the graph capturing on this thread (task groups update into it), if any.
std::optional<std::pair<c10::DeviceIndex, c10::MempoolId_t>> capturingPool();
// Called by random ops at launch: the graph capturing on this thread draws a replay seed per replay.
void noteRandomLaunch();

class NPUGraph {
 public:
  NPUGraph() = default;
  ~NPUGraph();
  NPUGraph(const NPUGraph&) = delete;
  NPUGraph& operator=(const NPUGraph&) = delete;

  // Begins capturing the current stream (not a device's default stream). `pool` {0, 0} gives the
  // graph a pool of its own; another graph's pool() or a graph_pool_handle() shares that pool.
  void captureBegin(c10::MempoolId_t pool = {0, 0}, nrtCaptureMode mode = NRT_CAPTURE_MODE_GLOBAL);
  void captureEnd();
  void replay();
  // Drops the graph and its hold on the pool's memory.
  void reset();
  c10::MempoolId_t pool() const;
  void enableDebugMode() { debug_ = true; }
  void debugDump(const std::string& path) const;
  size_t taskCount() const;

 private:
  nrtGraph_t graph_ = nullptr;
  bool capturing_ = false;
  bool pool_held_ = false;  // this graph counts as a user of mempool_id_
  bool uses_random_ = false;
  bool debug_ = false;
  c10::MempoolId_t mempool_id_{0, 0};
  c10::DeviceIndex device_ = -1;
  nrtStream_t capture_stream_ = nullptr;
  uint64_t capture_id_ = 0;

  friend void noteRandomLaunch();
  friend std::optional<std::pair<c10::DeviceIndex, c10::MempoolId_t>> capturingPool();
};

}  // namespace c10_npu

// NPUGraph.h - torch.npu.NPUGraph: the work launched on the current stream captured into a graph that
// replays it, with a private memory pool and fresh random numbers per replay.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <npu/graph.h>

namespace c10_npu {

// A fresh id for a memory pool that graphs share (torch.npu.graph_pool_handle()).
c10::MempoolId_t graphPoolHandle();
// Drops one user of a private pool (a graph's reset, a MemPool's end); see NPUGraph.cpp.
void releasePoolUser(c10::DeviceIndex device, c10::MempoolId_t id);
// True while any NPUGraph of this process is capturing: launch policies that synchronise after each
// op (TASK_QUEUE_ENABLE=0, ASCEND_LAUNCH_BLOCKING=1, SyncLaunchStream) queue instead meanwhile.
bool anyCaptureUnderway();
// torch.npu.is_current_stream_capturing().
bool currentStreamCapturing();
// The pool of the graph capturing on this thread (task groups update into it), if any.
std::optional<std::pair<c10::DeviceIndex, c10::MempoolId_t>> capturingPool();
// Random numbers in captures. While this thread captures, a random op's draw from the device's
// default generator (or from a generator registered with the graph) is not made: the op gets a slot
// seed (NRT_REPLAY_SEED_SLOT), and each replay fills the slots with fresh draws from the generators in
// the order eager execution would make them, so a replay after manual_seed(s) gives eager's numbers
// and leaves the generators where eager would. nullopt: not captured (draw as usual).
std::optional<uint64_t> captureRandomSlot(c10::GeneratorImpl* generator);
// The capture's draw position in `generator` (what get_rng_state / set_rng_state see inside a
// capture), or null when this thread captures no draws from it.
uint64_t* captureDrawPosition(c10::GeneratorImpl* generator);

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
  // Draws from `generator` made while capturing are replayed like the default generator's.
  void registerGeneratorState(const at::Generator& generator);

 private:
  nrtGraph_t graph_ = nullptr;
  bool capturing_ = false;
  bool pool_held_ = false;  // this graph counts as a user of mempool_id_
  bool debug_ = false;
  c10::MempoolId_t mempool_id_{0, 0};
  c10::DeviceIndex device_ = -1;
  nrtStream_t capture_stream_ = nullptr;
  uint64_t capture_id_ = 0;

  // The graph the current stream records into (random draws from another thread, e.g. autograd's).
  static NPUGraph* capturingOnCurrentStream();
  struct CapturedGenerator {
    c10::intrusive_ptr<c10::GeneratorImpl> impl;
    uint64_t next = 0;   // draw position during the capture
    uint64_t count = 0;  // draws a replay makes from it
  };
  std::vector<CapturedGenerator> generators_;  // [0]: the device's default generator
  std::vector<at::Generator> registered_;
  std::vector<std::pair<size_t, uint64_t>> slots_;  // slot -> (generator, draw position)
  std::map<std::pair<size_t, uint64_t>, uint64_t> slot_of_;

  friend std::optional<uint64_t> captureRandomSlot(c10::GeneratorImpl* generator);
  friend uint64_t* captureDrawPosition(c10::GeneratorImpl* generator);
  friend std::optional<std::pair<c10::DeviceIndex, c10::MempoolId_t>> capturingPool();
};

}  // namespace c10_npu

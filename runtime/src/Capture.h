// Capture.h - stream capture: the graph being recorded from one or more capturing streams, the
// checks that refuse synchronising calls while captures are active, and the recorded graph.
#ifndef NPU_RUNTIME_SRC_CAPTURE_H_
#define NPU_RUNTIME_SRC_CAPTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "Stream.h"
#include "npu/graph.h"

namespace npu::runtime {

class EventRecord;
class Stream;

// One recorded task. run() may be called any number of times (once per replay); release() once.
struct GraphNode {
  std::function<int()> run;
  std::function<void()> release;
  const char* name = nullptr;  // the op ("aclnnAdd"), as launches name tasks; null: a host task
  const char* site = nullptr;  // launch site
  uint64_t stream_id = 0;      // the stream it was launched on
  const char* kind = "host";   // "host", "memcpy", "memset", "status" (dumps)
};

// Releases each node's data exactly once.
void ReleaseNodes(std::vector<GraphNode>& nodes);

// A task group's current tasks (nrtStreamBeginTaskGroup): the graph holds one node that runs them,
// and an update swaps them for new ones while replays keep the set they started with.
class TaskGroup {
 public:
  explicit TaskGroup(std::vector<GraphNode> nodes) : tasks_(std::make_shared<Tasks>(std::move(nodes))) {}
  int Run() const;
  void Swap(std::vector<GraphNode> nodes);
  size_t size() const;

 private:
  struct Tasks {
    explicit Tasks(std::vector<GraphNode> n) : nodes(std::move(n)) {}
    ~Tasks() { ReleaseNodes(nodes); }
    std::vector<GraphNode> nodes;
  };
  mutable std::mutex mu_;
  std::shared_ptr<Tasks> tasks_;
};

// A capture in progress, shared by the streams recording into it.
class Capture {
 public:
  Capture(uint64_t id, nrtCaptureMode mode, const std::shared_ptr<Stream>& origin);
  ~Capture();  // releases the nodes of a capture that never became a graph

  uint64_t id() const { return id_; }
  nrtCaptureMode mode() const { return mode_; }
  std::thread::id thread() const { return thread_; }
  uint64_t origin() const { return origin_; }
  int device() const { return device_; }

  // Records a task launched on `stream` (a member); refused (node released) once the capture ended.
  nrtError_t Add(Stream& stream, GraphNode node);
  // An event recorded on `stream` during the capture: the position others then wait for.
  uint64_t Position(uint64_t stream_id);
  // `waiter` waits for an event recorded on `recorded_on` at `position`: it joins the capture (when
  // not yet a member) and has seen that stream's work up to there.
  void Wait(const std::shared_ptr<Stream>& waiter, uint64_t recorded_on, uint64_t position);
  // Refuses a call the capture cannot allow (nothing is recorded; the capture goes on).
  nrtError_t Refuse(nrtError_t code, const std::string& reason) const;
  // Ends the capture: detaches every member stream and hands over the nodes, or fails (see
  // nrtStreamEndCapture). Called once, by the origin stream's end.
  nrtError_t End(std::vector<GraphNode>* nodes);
  bool ended() const;
  // Task groups: the tasks recorded from `stream` after BeginGroup become one group node at EndGroup.
  nrtError_t BeginGroup(Stream& stream);
  nrtError_t EndGroup(Stream& stream, std::shared_ptr<TaskGroup>* group);
  // An update capture (nrtStreamBeginTaskUpdate) records the new tasks of this group.
  std::shared_ptr<TaskGroup> update_target;

 private:
  struct Member {
    std::weak_ptr<Stream> stream;
    uint64_t tasks = 0;  // nodes recorded from this stream
  };
  const uint64_t id_;
  const nrtCaptureMode mode_;
  const std::thread::id thread_;
  const uint64_t origin_;
  const int device_;
  mutable std::mutex mu_;
  std::vector<GraphNode> nodes_;
  std::unordered_map<uint64_t, Member> members_;
  // For each member: how far the origin stream (transitively) has waited for it.
  std::unordered_map<uint64_t, std::unordered_map<uint64_t, uint64_t>> seen_;
  bool ended_ = false;
  std::unordered_map<uint64_t, size_t> group_begin_;  // stream id -> index of its open group's first task
};

// The checks synchronising calls make (nrtCaptureMode): NRT_SUCCESS, or the refusal. `call` names the API, `stream` the stream it synchronises
// (null: none in particular).
nrtError_t CheckSyncAllowed(const char* call, Stream* stream);
// Registry of the captures in progress (for the checks above).
void CaptureStarted(const std::shared_ptr<Capture>& capture);
void CaptureEnded(const Capture& capture);

// A recorded graph, replayed by nrtGraphLaunch.
class Graph {
 public:
  Graph(uint64_t id, int device, std::vector<GraphNode> nodes) : id_(id), device_(device), nodes_(std::move(nodes)) {}
  ~Graph() { ReleaseNodes(nodes_); }
  uint64_t id() const { return id_; }
  int device() const { return device_; }
  const std::vector<GraphNode>& nodes() const { return nodes_; }

 private:
  const uint64_t id_;
  const int device_;
  std::vector<GraphNode> nodes_;
};

// Records `node` into the capture of `stream` (a launch on a capturing stream): the launch's result,
// or nullopt when the capture ended meanwhile (queue the work as usual).
std::optional<nrtError_t> RecordLaunch(Stream& stream, GraphNode&& node);

// Events recorded during a capture (Event.cpp): a sync or query of one is refused while its capture
// lasts; a stream waiting for one joins the capture (or, capturing another, is refused).
nrtError_t CheckCapturedEvent(const char* call, nrtEvent_t event, const EventRecord& record);
nrtError_t JoinCapture(const std::shared_ptr<Stream>& waiter, nrtEvent_t event, const EventRecord& record);

// Queues `op` on `stream`, or records it when the stream captures: the one path of the runtime's own
// stream operations (memsets, overflow-status ops, external events). `name` must live for the process.
template <typename Op>
nrtError_t EnqueueOrRecord(Stream& stream, Op op, const char* name, const char* kind) {
  if (stream.capturing()) {
    GraphNode node;
    node.run = op;
    node.name = name;
    node.kind = kind;
    if (auto recorded = RecordLaunch(stream, std::move(node))) return *recorded;
  }
  return stream.Enqueue(std::move(op), false, name);
}

// External events' record, wait and reset (Event.cpp): queued, or recorded on a capturing stream.
class ExternalFlag;
nrtError_t ExternalRecord(Stream& stream, const std::shared_ptr<ExternalFlag>& flag);
nrtError_t ExternalWait(Stream& stream, const std::shared_ptr<ExternalFlag>& flag);
nrtError_t ExternalReset(Stream& stream, const std::shared_ptr<ExternalFlag>& flag);

// The seeds of the replay running on this thread (nrtReplaySeeded); empty outside replays.
struct ReplaySeeds {
  const uint64_t* seeds = nullptr;
  size_t count = 0;
};
extern thread_local ReplaySeeds t_replay_seeds;

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_CAPTURE_H_

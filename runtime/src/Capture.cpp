// Capture.cpp - captures in progress: recording tasks from member streams, fork and join through
// events, invalidation, and the synchronising calls each capture mode refuses.
#include "Capture.h"

#include <algorithm>
#include <atomic>

#include "Error.h"
#include "Log.h"
#include "Stream.h"

namespace npu::runtime {
namespace {

// Captures in progress, for the checks of synchronising calls (few at a time: a plain list).
std::mutex g_captures_mu;
std::vector<std::weak_ptr<Capture>>* g_captures = new std::vector<std::weak_ptr<Capture>>;  // leaked
// The number of captures in progress: synchronising calls test it first (one relaxed load).
std::atomic<int> g_capture_count{0};

thread_local nrtCaptureMode t_thread_mode = NRT_CAPTURE_MODE_GLOBAL;

const char* ModeName(nrtCaptureMode mode) {
  switch (mode) {
    case NRT_CAPTURE_MODE_GLOBAL:
      return "global";
    case NRT_CAPTURE_MODE_THREAD_LOCAL:
      return "thread_local";
    default:
      return "relaxed";
  }
}

}  // namespace

thread_local ReplaySeeds t_replay_seeds;

void ReleaseNodes(std::vector<GraphNode>& nodes) {
  for (GraphNode& node : nodes) {
    if (node.release) {
      node.release();
      node.release = nullptr;
    }
  }
}

int TaskGroup::Run() const {
  std::shared_ptr<Tasks> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks = tasks_;  // an update during this run takes effect from the next replay
  }
  for (const GraphNode& node : tasks->nodes) {
    if (const int code = node.run()) return code;  // its message (nrtSetTaskErrMsg) stays set
  }
  return 0;
}

void TaskGroup::Swap(std::vector<GraphNode> nodes) {
  auto fresh = std::make_shared<Tasks>(std::move(nodes));
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.swap(fresh);  // the old tasks are released once no replay runs them
}

size_t TaskGroup::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_->nodes.size();
}

Capture::Capture(uint64_t id, nrtCaptureMode mode, const std::shared_ptr<Stream>& origin)
    : id_(id), mode_(mode), thread_(std::this_thread::get_id()), origin_(origin->id()), device_(origin->device()) {
  members_[origin_] = Member{origin, 0};
}

Capture::~Capture() { ReleaseNodes(nodes_); }

nrtError_t Capture::Add(Stream& stream, GraphNode node) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ended_) {
    lock.unlock();
    if (node.release) node.release();
    return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "cannot launch ", node.name ? node.name : "a task", " on ",
                       stream.name(), ": its capture #", id_, " ended while the launch was being recorded");
  }
  node.stream_id = stream.id();
  ++members_[stream.id()].tasks;
  nodes_.push_back(std::move(node));
  return NRT_SUCCESS;
}

uint64_t Capture::Position(uint64_t stream_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = members_.find(stream_id);
  return it == members_.end() ? 0 : it->second.tasks;
}

void Capture::Wait(const std::shared_ptr<Stream>& waiter, uint64_t recorded_on, uint64_t position) {
  std::lock_guard<std::mutex> lock(mu_);
  if (members_.find(waiter->id()) == members_.end()) members_[waiter->id()] = Member{waiter, 0};
  auto& seen = seen_[waiter->id()];
  seen[recorded_on] = std::max(seen[recorded_on], position);
  // What the recording stream had seen of others, the waiter has seen too.
  auto upstream = seen_.find(recorded_on);
  if (upstream != seen_.end() && recorded_on != waiter->id()) {
    for (const auto& [other, count] : upstream->second) seen[other] = std::max(seen[other], count);
  }
}

nrtError_t Capture::Refuse(nrtError_t code, const std::string& reason) const {
  return NPU_RT_FAIL(code, reason, " (the call was refused; capture #", id_, " goes on without it)");
}

bool Capture::ended() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ended_;
}

nrtError_t Capture::End(std::vector<GraphNode>* nodes) {
  std::vector<std::shared_ptr<Stream>> members;
  std::string unjoined;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
    const auto& origin_seen = seen_[origin_];
    for (const auto& [id, member] : members_) {
      std::shared_ptr<Stream> stream = member.stream.lock();
      if (stream) members.push_back(stream);
      if (id == origin_ || member.tasks == 0) continue;
      auto seen = origin_seen.find(id);
      if (seen == origin_seen.end() || seen->second < member.tasks) {
        unjoined += StrCat(unjoined.empty() ? "" : ", ", stream ? stream->name() : StrCat("stream #", id));
      }
    }
    if (unjoined.empty()) {
      *nodes = std::move(nodes_);
      nodes_.clear();
    }
  }
  for (const std::shared_ptr<Stream>& stream : members) stream->SetCapture(nullptr);
  CaptureEnded(*this);
  if (!unjoined.empty()) {
    return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "capture #", id_, ": work on ", unjoined,
                       " (forked from the capture through an event) was not joined back into the capturing stream "
                       "before the capture ended; record an event on each such stream and make the capturing "
                       "stream wait for it (torch.npu.current_stream().wait_stream(side_stream))");
  }
  return NRT_SUCCESS;
}

nrtError_t Capture::BeginGroup(Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (group_begin_.count(stream.id()) != 0) {
    return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamBeginTaskGroup: ", stream.name(),
                       " already has an open task group in capture #", id_, "; end it first");
  }
  group_begin_[stream.id()] = nodes_.size();
  return NRT_SUCCESS;
}

nrtError_t Capture::EndGroup(Stream& stream, std::shared_ptr<TaskGroup>* group) {
  std::lock_guard<std::mutex> lock(mu_);
  auto open = group_begin_.find(stream.id());
  if (open == group_begin_.end()) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamEndTaskGroup: ", stream.name(),
                       " has no open task group (call nrtStreamBeginTaskGroup first)");
  }
  const size_t begin = open->second;
  group_begin_.erase(open);
  std::vector<GraphNode> tasks(std::make_move_iterator(nodes_.begin() + static_cast<std::ptrdiff_t>(begin)),
                               std::make_move_iterator(nodes_.end()));
  nodes_.resize(begin);
  *group = std::make_shared<TaskGroup>(std::move(tasks));
  GraphNode node;
  node.run = [g = *group] { return g->Run(); };
  node.name = "task group";
  node.kind = "group";
  node.stream_id = stream.id();
  nodes_.push_back(std::move(node));
  return NRT_SUCCESS;
}

void CaptureStarted(const std::shared_ptr<Capture>& capture) {
  std::lock_guard<std::mutex> lock(g_captures_mu);
  g_captures->push_back(capture);
  g_capture_count.fetch_add(1, std::memory_order_relaxed);
}

void CaptureEnded(const Capture& capture) {
  std::lock_guard<std::mutex> lock(g_captures_mu);
  auto& list = *g_captures;
  const size_t before = list.size();
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const std::weak_ptr<Capture>& c) {
                              auto locked = c.lock();
                              return !locked || locked.get() == &capture;
                            }),
             list.end());
  g_capture_count.fetch_sub(static_cast<int>(before - list.size()), std::memory_order_relaxed);
}

nrtError_t CheckSyncAllowed(const char* call, Stream* stream) {
  if (stream != nullptr && stream->capturing()) {
    if (std::shared_ptr<Capture> capture = stream->capture()) {
      return capture->Refuse(NRT_ERROR_CAPTURE_UNSUPPORTED,
                             StrCat(call, " on ", stream->name(), " is not allowed while it is capturing (",
                                    "capture #", capture->id(), "): captured work has not run, so there is "
                                    "nothing to wait for (a .item(), .cpu(), print or synchronize() inside "
                                    "the captured region?)"));
    }
  }
  if (g_capture_count.load(std::memory_order_relaxed) == 0 || t_thread_mode == NRT_CAPTURE_MODE_RELAXED) {
    return NRT_SUCCESS;
  }
  std::shared_ptr<Capture> refusing;
  {
    std::lock_guard<std::mutex> lock(g_captures_mu);
    for (const auto& weak : *g_captures) {
      std::shared_ptr<Capture> capture = weak.lock();
      if (!capture || capture->ended()) continue;
      const bool applies = capture->mode() == NRT_CAPTURE_MODE_GLOBAL ||
                           (capture->mode() == NRT_CAPTURE_MODE_THREAD_LOCAL &&
                            capture->thread() == std::this_thread::get_id());
      if (applies) {
        refusing = std::move(capture);
        break;
      }
    }
  }
  if (!refusing) return NRT_SUCCESS;
  return refusing->Refuse(
      NRT_ERROR_CAPTURE_UNSUPPORTED,
      StrCat(call, " is not allowed while capture #", refusing->id(), " (mode ", ModeName(refusing->mode()),
             ") is active: a synchronising call during a ", ModeName(refusing->mode()),
             " capture is unsafe (capture with capture_error_mode=\"relaxed\" or \"thread_local\", or "
             "move the call out of the captured region)"));
}

}  // namespace npu::runtime

extern "C" nrtError_t nrtThreadExchangeCaptureMode(nrtCaptureMode* mode) {
  if (mode == nullptr) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtThreadExchangeCaptureMode: mode is NULL");
  }
  if (*mode != NRT_CAPTURE_MODE_GLOBAL && *mode != NRT_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != NRT_CAPTURE_MODE_RELAXED) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtThreadExchangeCaptureMode: unknown mode ",
                       static_cast<int>(*mode), " (0 global, 1 thread_local, 2 relaxed)");
  }
  std::swap(*mode, npu::runtime::t_thread_mode);
  return NRT_SUCCESS;
}

extern "C" uint64_t nrtReplaySeeded(uint64_t seed) {
  const npu::runtime::ReplaySeeds& replay = npu::runtime::t_replay_seeds;
  const uint64_t slot = seed - NRT_REPLAY_SEED_SLOT_BASE;  // wraps for seeds below the base
  return slot < replay.count ? replay.seeds[slot] : seed;
}

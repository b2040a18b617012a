// Activity.cpp - activity records: labels, stream hooks, the bounded buffer and the C API.
#include "Activity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "Error.h"
#include "Event.h"
#include "Log.h"
#include "Stream.h"

namespace npu::runtime::activity {

std::atomic<bool> g_active{false};

namespace {

constexpr size_t kDefaultCapacity = size_t{1} << 20;

std::atomic<bool> g_accepting{false};

const char* KindName(uint32_t kind) {
  switch (kind) {
    case NRT_ACTIVITY_HOST_TASK: return "host function";
    case NRT_ACTIVITY_DEVICE_OP: return "device op";
    case NRT_ACTIVITY_KERNEL: return "kernel";
    case NRT_ACTIVITY_MEMCPY: return "memcpy";
    case NRT_ACTIVITY_MEMSET: return "memset";
    case NRT_ACTIVITY_EVENT_RECORD: return "event record";
    case NRT_ACTIVITY_EVENT_WAIT: return "event wait";
    case NRT_ACTIVITY_COLLECTIVE: return "collective";
    default: return "task";
  }
}

struct Label {
  bool set = false;
  nrtActivityRecord record{};  // kind, name, bytes, memcpy_kind, block_dim, api_start_ns
};

void Fill(Label& label, nrtActivityKind kind, const char* name, uint64_t bytes, uint32_t memcpy_kind,
          uint32_t block_dim) {
  label.set = true;
  label.record = nrtActivityRecord{};
  label.record.kind = kind;
  label.record.bytes = bytes;
  label.record.memcpy_kind = memcpy_kind;
  label.record.block_dim = block_dim;
  label.record.api_start_ns = Now();
  std::strncpy(label.record.name, name && *name ? name : KindName(kind), NRT_ACTIVITY_NAME_MAX - 1);
}

uint32_t ThreadId() {
  thread_local const uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
}

thread_local Label t_label;            // the task this thread enqueues next
thread_local Label t_host_func_label;  // the host function this thread launches next
thread_local std::vector<uint64_t> t_correlation;
// The task this stream worker is running, between TaskStarting and TaskFinished.
thread_local nrtActivityRecord t_running{};
thread_local uint64_t t_running_session = 0;

struct TaskKey {
  uint64_t stream_id;
  uint64_t index;
  bool operator==(const TaskKey&) const = default;
};
struct TaskKeyHash {
  size_t operator()(const TaskKey& k) const { return std::hash<uint64_t>()(k.stream_id * 0x9E3779B97F4A7C15ULL ^ k.index); }
};

class Recorder {
 public:
  void Enable(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    ++session_;
    capacity_ = capacity == 0 ? kDefaultCapacity : capacity;
    pending_.clear();
    events_.clear();
    done_.clear();
    dropped_ = 0;
    in_flight_ = 0;
    sequence_ = 0;
    g_accepting.store(true, std::memory_order_relaxed);
    g_active.store(true, std::memory_order_relaxed);
  }

  void Disable() {
    std::lock_guard<std::mutex> lock(mu_);
    g_accepting.store(false, std::memory_order_relaxed);
    MaybeGoIdle();
  }

  void Enqueued(uint64_t stream_id, int device, uint64_t index, Label& label) {
    const uint64_t now = Now();
    std::lock_guard<std::mutex> lock(mu_);
    if (!g_accepting.load(std::memory_order_relaxed)) return;
    if (!label.set) Fill(label, NRT_ACTIVITY_HOST_TASK, nullptr, 0, 0, 0);
    nrtActivityRecord& rec = pending_[TaskKey{stream_id, index}];
    rec = label.record;
    rec.device = device;
    rec.stream_id = stream_id;
    rec.correlation_id = t_correlation.empty() ? 0 : t_correlation.back();
    rec.sequence = sequence_++;
    rec.enqueue_ns = now;
    rec.launch_tid = ThreadId();
    ++in_flight_;
  }

  bool Starting(uint64_t stream_id, uint64_t index) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(TaskKey{stream_id, index});
      if (it == pending_.end()) return false;  // enqueued before recording started
      t_running = it->second;
      t_running_session = session_;
      pending_.erase(it);
    }
    t_running.start_ns = Now();
    return true;
  }

  void Finished(bool failed) {
    t_running.end_ns = Now();
    t_running.failed = failed ? 1 : 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (t_running_session != session_) return;  // recording restarted meanwhile
    Keep(t_running);
    --in_flight_;
    MaybeGoIdle();
  }

  void CopyRan(const nrtActivityRecord& rec) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!g_accepting.load(std::memory_order_relaxed)) return;
    nrtActivityRecord copy = rec;
    copy.sequence = sequence_++;
    Keep(copy);
  }

  void EventRecorded(const nrtActivityRecord& rec, std::shared_ptr<EventRecord> record) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!g_accepting.load(std::memory_order_relaxed)) return;
    nrtActivityRecord copy = rec;
    copy.sequence = sequence_++;
    events_.emplace_back(copy, std::move(record));
  }

  nrtError_t Flush(int64_t timeout_ms) {
    if (OnAnyStreamWorker()) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE,
                         "nrtActivityFlush: called from a host function, it would wait for its own stream");
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      size_t waiting = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        CollectEvents();
        waiting = static_cast<size_t>(in_flight_) + events_.size();
      }
      if (waiting == 0) return NRT_SUCCESS;
      if (std::chrono::steady_clock::now() >= deadline) {
        return NPU_RT_FAIL(NRT_ERROR_NOT_READY, "nrtActivityFlush: ", waiting,
                           " recorded task(s) had not finished after ", timeout_ms,
                           " ms (is a stream waiting for an event that is never recorded?)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  size_t Drain(nrtActivityRecord* out, size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    CollectEvents();
    size_t n = 0;
    while (n < capacity && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }

  uint64_t Dropped() {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  // Under mu_.
  void Keep(const nrtActivityRecord& rec) {
    if (done_.size() >= capacity_) {
      ++dropped_;
    } else {
      done_.push_back(rec);
    }
  }

  // Under mu_: event records complete by themselves; they are finished once their event is.
  void CollectEvents() {
    for (auto it = events_.begin(); it != events_.end();) {
      if (it->second->done()) {
        const auto t = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 it->second->time().time_since_epoch())
                                                 .count());
        it->first.start_ns = it->first.end_ns = t;
        Keep(it->first);
        it = events_.erase(it);
      } else {
        ++it;
      }
    }
    MaybeGoIdle();
  }

  // Under mu_: once recording is off and nothing recorded is still running, the hooks can stop.
  void MaybeGoIdle() {
    if (!g_accepting.load(std::memory_order_relaxed) && in_flight_ == 0) {
      g_active.store(false, std::memory_order_relaxed);
      pending_.clear();
    }
  }

  std::mutex mu_;
  uint64_t session_ = 0;
  size_t capacity_ = kDefaultCapacity;
  std::unordered_map<TaskKey, nrtActivityRecord, TaskKeyHash> pending_;
  std::vector<std::pair<nrtActivityRecord, std::shared_ptr<EventRecord>>> events_;
  std::deque<nrtActivityRecord> done_;
  uint64_t dropped_ = 0;
  int64_t in_flight_ = 0;  // recorded tasks not finished yet
  uint64_t sequence_ = 0;
};

// Leaked like the runtime state: stream workers may still finish tasks during static destruction.
Recorder& TheRecorder() {
  static Recorder* recorder = new Recorder();
  return *recorder;
}

}  // namespace

bool Accepting() { return g_accepting.load(std::memory_order_relaxed); }

uint64_t Now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void LabelTask(nrtActivityKind kind, const char* name, uint64_t bytes, uint32_t memcpy_kind, uint32_t block_dim) {
  Fill(t_label, kind, name, bytes, memcpy_kind, block_dim);
}

void LabelNextHostFunc(nrtActivityKind kind, const char* name, uint64_t bytes, uint32_t block_dim) {
  Fill(t_host_func_label, kind, name, bytes, 0, block_dim);
}

void TakeHostFuncLabel() {
  if (t_host_func_label.set) {
    t_label = t_host_func_label;
    t_host_func_label.set = false;
  } else {
    Fill(t_label, NRT_ACTIVITY_HOST_TASK, nullptr, 0, 0, 0);
  }
}

void TaskEnqueued(uint64_t stream_id, int device, uint64_t index) {
  TheRecorder().Enqueued(stream_id, device, index, t_label);
  t_label.set = false;
}

bool TaskStarting(uint64_t stream_id, uint64_t index) { return TheRecorder().Starting(stream_id, index); }

void TaskFinished(bool failed) { TheRecorder().Finished(failed); }

void CopyRan(int device, uint64_t bytes, uint32_t memcpy_kind, uint64_t start_ns, uint64_t end_ns) {
  Label label;
  Fill(label, NRT_ACTIVITY_MEMCPY, nullptr, bytes, memcpy_kind, 0);
  nrtActivityRecord& rec = label.record;
  rec.device = device;
  rec.correlation_id = t_correlation.empty() ? 0 : t_correlation.back();
  rec.api_start_ns = rec.enqueue_ns = rec.start_ns = start_ns;
  rec.end_ns = end_ns;
  rec.launch_tid = ThreadId();
  TheRecorder().CopyRan(rec);
}

void NodeRan(nrtActivityKind kind, const char* name, uint64_t stream_id, int device, uint64_t start_ns,
             uint64_t end_ns, bool failed) {
  Label label;
  Fill(label, kind, name, 0, 0, 0);
  nrtActivityRecord& rec = label.record;
  rec.device = device;
  rec.stream_id = stream_id;
  rec.api_start_ns = rec.enqueue_ns = rec.start_ns = start_ns;
  rec.end_ns = end_ns;
  rec.failed = failed ? 1 : 0;
  rec.launch_tid = ThreadId();
  TheRecorder().CopyRan(rec);
}

void EventRecorded(uint64_t stream_id, int device, std::shared_ptr<EventRecord> record) {
  Label label;
  Fill(label, NRT_ACTIVITY_EVENT_RECORD, nullptr, 0, 0, 0);
  nrtActivityRecord& rec = label.record;
  rec.device = device;
  rec.stream_id = stream_id;
  rec.correlation_id = t_correlation.empty() ? 0 : t_correlation.back();
  rec.enqueue_ns = rec.api_start_ns;
  rec.launch_tid = ThreadId();
  TheRecorder().EventRecorded(rec, std::move(record));
}

}  // namespace npu::runtime::activity

using npu::runtime::activity::TheRecorder;

extern "C" {

nrtError_t nrtActivityEnable(size_t capacity) {
  TheRecorder().Enable(capacity);
  NPU_RT_LOG(kInfo, "activity recording enabled");
  return NRT_SUCCESS;
}

nrtError_t nrtActivityDisable(void) {
  TheRecorder().Disable();
  NPU_RT_LOG(kInfo, "activity recording disabled");
  return NRT_SUCCESS;
}

int nrtActivityIsEnabled(void) { return npu::runtime::activity::Accepting() ? 1 : 0; }

nrtError_t nrtActivityFlush(int64_t timeout_ms) {
  if (timeout_ms < 0) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtActivityFlush: negative timeout ", timeout_ms);
  return TheRecorder().Flush(timeout_ms);
}

nrtError_t nrtActivityDrain(nrtActivityRecord* records, size_t capacity, size_t* count) {
  if (count == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtActivityDrain: count is NULL");
  if (records == nullptr && capacity > 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtActivityDrain: records is NULL for a capacity of ", capacity);
  }
  *count = TheRecorder().Drain(records, capacity);
  return NRT_SUCCESS;
}

uint64_t nrtActivityDropped(void) { return TheRecorder().Dropped(); }

uint64_t nrtActivityTimestamp(void) { return npu::runtime::activity::Now(); }

void nrtActivityPushCorrelationId(uint64_t id) {
  try {
    npu::runtime::activity::t_correlation.push_back(id);
  } catch (...) {
  }
}

void nrtActivityPopCorrelationId(void) {
  auto& stack = npu::runtime::activity::t_correlation;
  if (!stack.empty()) stack.pop_back();
}

void nrtActivityLabelNextTask(nrtActivityKind kind, const char* name, uint64_t bytes) {
  if (!npu::runtime::activity::Accepting()) return;
  npu::runtime::activity::LabelNextHostFunc(kind, name, bytes);
}

}  // extern "C"

// Stream.h - an in-order task queue run by its own worker thread, keeping the first task failure.
#ifndef NPU_RUNTIME_SRC_STREAM_H_
#define NPU_RUNTIME_SRC_STREAM_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Activity.h"
#include "FaultInjection.h"
#include "TaskQueue.h"
#include "npu/runtime.h"

namespace npu::runtime {

// Set by nrtSetWorkerIdleHook: run on a stream worker that has run out of work, before it sleeps.
extern std::atomic<nrtWorkerIdleHook> g_worker_idle_hook;
// Set by nrtSetWorkerTaskHook: run on a stream worker before each task.
extern std::atomic<nrtWorkerTaskHook> g_worker_task_hook;

class Capture;
class EventRecord;
class FaultInjector;
class Graph;

// What every stream of a runtime shares: injected faults (nullptr when NPU_SIM_FAULT is unset) and
// the watchdog's limit on one task in nanoseconds (zero or nullptr: off), which the runtime owns and
// nrtSetTaskTimeout changes.
struct StreamOptions {
  FaultInjector* faults = nullptr;
  const std::atomic<int64_t>* task_timeout_ns = nullptr;
};

// True once the calling thread made the process's last few short launches in a row. Stream::TryRunNow
// runs tasks on the caller only then: with several threads launching, their Python threads compete
// for the interpreter lock, and a launch that keeps the caller busy longer lets another thread take
// the lock, costing a context switch per op (4 threads adding on 4 streams: 0.09 switches per op
// when queued, 0.39 when run on the callers).
bool SoleLauncher();

class Stream {
 public:
  // generation is the runtime's, so that the worker's current device is this stream's device.
  Stream(uint64_t id, int device, bool is_default, uint64_t generation, StreamOptions options = {});
  ~Stream();  // Shutdown()
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  uint64_t id() const { return id_; }
  int device() const { return device_; }
  bool is_default() const { return is_default_; }
  std::string name() const;  // "npu:0 stream #3", for messages

  // Queues a callable (stored inline, see Task); NRT_ERROR_INVALID_HANDLE once Shutdown() has
  // begun, and the task is then dropped.
  // name and site must live for the process (see nrtLaunchHostFuncNamed).
  template <typename F>
  nrtError_t Enqueue(F&& fn, bool after_count = false, const char* name = nullptr,
                     const char* site = nullptr) {
    if (options_.faults != nullptr) {
      if (nrtError_t error = CheckNotLost()) return error;
    }
    {
      TaskQueue::ProducerLock lock(queue_);
      if (stopping_.load(std::memory_order_relaxed)) return RefuseWork();
      // Activity hook, before the worker can see the task: one relaxed load when recording is off.
      // Event markers (after_count) are not tasks of their own for profilers: the event record is.
      if (!after_count && activity::Active()) activity::TaskEnqueued(id_, device_, queue_.Published());
      Task& task = queue_.Reserve();
      task.Emplace(std::forward<F>(fn));
      task.after_count = after_count;
      if (!after_count) tasks_.store(tasks_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      task.name = name;
      task.site = site;
      task.fault_matches = options_.faults != nullptr && !after_count ? options_.faults->MatchAtLaunch(name) : 0;
      queue_.Publish();
    }
    WakeWorker();
    return NRT_SUCCESS;
  }
  // Runs `fn` now on the calling thread, as the stream's next task, if the stream is idle and
  // nothing watches its tasks one by one (profiler, watchdog, injected faults); false, with nothing
  // done, otherwise. The producer lock is held meanwhile, so no other launch overtakes it; a failure
  // becomes the stream's pending error like a queued task's.
  template <typename F>
  bool TryRunNow(F&& fn, const char* name, const char* site) {
    if (options_.faults != nullptr || watched() || activity::Active() || OnWorkerThread()) return false;
    if (!SoleLauncher()) return false;
    TaskQueue::ProducerLock lock(queue_);
    if (stopping_.load(std::memory_order_relaxed) || !Idle()) return false;
    tasks_.store(tasks_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    Task task;
    task.Emplace(std::forward<F>(fn));
    task.name = name;
    task.site = site;
    RunNow(task);
    return true;
  }
  // Completes `record` once every task enqueued so far has completed, after the stream counts them,
  // so that a stream whose last event is done also reports itself idle.
  nrtError_t EnqueueMarker(std::shared_ptr<EventRecord> record);
  // Waits until every task enqueued before the call has run (spinning briefly first: a short op
  // finishes within microseconds); refuses on its own worker, which would wait for itself. With the
  // watchdog on, fails with NRT_ERROR_TASK_TIMEOUT once the running task exceeds its limit.
  nrtError_t Synchronize();
  // With the watchdog on, waits for `reached` by polling and fails with NRT_ERROR_TASK_TIMEOUT once
  // this stream's running task exceeds its limit (event syncs use it: the event's stream is watched).
  bool watched() const { return TaskTimeoutNs() > 0; }
  int64_t TaskTimeoutNs() const {
    return options_.task_timeout_ns == nullptr ? 0 : options_.task_timeout_ns->load(std::memory_order_relaxed);
  }
  nrtError_t WaitWatched(const std::function<bool()>& reached) const;
  // Runs on this stream's worker (an nrtStreamWaitEvent task): waits for `record`, and meanwhile
  // lets the watchdog name the stream waited for and what runs there.
  void WaitForEvent(EventRecord& record);
  // NRT_ERROR_DEVICE_LOST once an injected device_lost fault took this stream's device.
  nrtError_t CheckNotLost() const;
  bool Idle() const { return retired_.load(std::memory_order_seq_cst) == queue_.Published(); }
  // Tasks enqueued so far, event markers not counted (nrtStreamGetTaskCount).
  uint64_t enqueued() const { return tasks_.load(std::memory_order_acquire); }
  bool OnWorkerThread() const { return std::this_thread::get_id() == worker_id_; }
  // The first failure since the last call (with a count of later ones), consumed by this call.
  std::optional<std::string> TakeError();
  // Rejects new work, lets the queue drain, joins the worker. Idempotent.
  void Shutdown();
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }

  // Stream capture (Capture.h): launches check capturing() (one relaxed load) and, when set, record
  // into capture() instead of queuing.
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }
  std::shared_ptr<Capture> capture() const {
    std::lock_guard<std::mutex> lock(capture_mu_);
    return capture_;
  }
  void SetCapture(std::shared_ptr<Capture> capture) {
    std::lock_guard<std::mutex> lock(capture_mu_);
    capturing_.store(capture != nullptr, std::memory_order_release);
    capture_ = std::move(capture);
  }
  // On the worker: one replay of `graph` (nrtGraphLaunch's task). Each recorded task is watched,
  // faulted and profiled as a queued task would be; the first failure ends the replay.
  std::optional<std::string> RunGraph(const Graph& graph, const std::vector<uint64_t>& replay_seeds);

 private:
  void Run();
  nrtError_t RefuseWork();
  void WakeWorker() {
    if (worker_sleeping_.load(std::memory_order_seq_cst)) {
      wake_.fetch_add(1, std::memory_order_seq_cst);
      wake_.notify_one();
      if (worker_timed_.load(std::memory_order_seq_cst)) {
        { std::lock_guard<std::mutex> lock(idle_mu_); }  // the worker is either waiting or sees the work
        idle_cv_.notify_one();
      }
    }
  }
  // The worker's first sleep after running tasks: at most kIdleRelease, then the idle hook runs.
  void SleepBeforeIdleHook(uint64_t index, std::chrono::microseconds budget);
  void RecordFailure(std::string message);
  void RunNow(Task& task);  // TryRunNow's run, on the calling thread
  // Watchdog: what the worker is running and since when (steady-clock ns; 0 when idle).
  void WatchTask(const Task& task) { WatchNamed(task.name, task.site); }
  void WatchNamed(const char* name, const char* site);
  std::optional<std::string> StuckTask() const;
  // ", where <op> has been running for <t> (launched from <site>)" for the task running now, following
  // event waits upstream (depth bounds a cycle of streams waiting for each other).
  std::string RunningTask(int depth) const;
  // Injected faults for a task that just ran for `ran`: may fail, slow down or hang it.
  std::optional<std::string> ApplyFaults(const Task& task, std::chrono::nanoseconds ran,
                                         std::optional<std::string> failure) {
    return ApplyFaults(task.name, task.site, task.fault_matches, ran, std::move(failure));
  }
  std::optional<std::string> ApplyFaults(const char* task_name, const char* site, uint32_t matches,
                                         std::chrono::nanoseconds ran, std::optional<std::string> failure);

  const uint64_t id_;
  const int device_;
  const bool is_default_;
  const uint64_t generation_;
  const StreamOptions options_;

  TaskQueue queue_;
  // Each on a line of its own: the producer writes tasks_ per launch, and the idle worker polls
  // stopping_; sharing a line moved it between the two cores on every launch.
  alignas(64) std::atomic<uint64_t> tasks_{0};  // written by the producer holding the queue's lock
  alignas(64) std::atomic<bool> stopping_{false};
  alignas(64) std::atomic<bool> worker_sleeping_{false};
  std::atomic<uint32_t> wake_{0};  // futex word the idle worker sleeps on
  // Set while the worker's sleep is the timed one before the idle hook (SleepBeforeIdleHook).
  std::atomic<bool> worker_timed_{false};
  // Set by Synchronize(): the next time the worker runs out of work it runs the idle hook soon.
  std::atomic<bool> idle_hook_now_{false};
  // Host threads blocked in Synchronize() on this stream (past the first spin).
  std::atomic<int> host_waiting_{0};
  struct HostWaiting {
    explicit HostWaiting(std::atomic<int>& n) : n_(n) { n_.fetch_add(1, std::memory_order_relaxed); }
    ~HostWaiting() { n_.fetch_sub(1, std::memory_order_relaxed); }
    std::atomic<int>& n_;
  };
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  // Tasks done: retired_ counts an event marker just before it completes its event (so a done
  // event implies an idle stream), completed_ just after (so a finished sync implies done events).
  alignas(64) std::atomic<uint64_t> retired_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint32_t> done_{0};        // futex word synchronising callers sleep on
  std::atomic<uint32_t> sync_waiters_{0};
  // The lowest task count a sleeping caller waits for: the worker wakes callers when it gets there,
  // not after every task (a wake-up per task cost a futex call and a context switch each).
  std::atomic<uint64_t> wake_at_{UINT64_MAX};

  std::atomic<bool> has_error_{false};  // checked without the lock by every sync
  std::mutex error_mu_;  // failures are rare: a plain lock
  std::optional<std::string> first_error_;
  uint64_t later_errors_ = 0;

  mutable std::mutex watch_mu_;  // used only with the watchdog on
  int64_t watch_since_ns_ = 0;
  const char* watch_name_ = nullptr;
  const char* watch_site_ = nullptr;
  std::weak_ptr<Stream> watch_upstream_;  // the stream a running event wait waits for

  std::atomic<bool> capturing_{false};
  mutable std::mutex capture_mu_;
  std::shared_ptr<Capture> capture_;

  std::mutex join_mu_;  // a second Shutdown() caller must also wait for the join
  std::thread worker_;
  std::thread::id worker_id_;
};

// True on any stream's worker thread, where waiting for all streams would wait for itself.
bool OnAnyStreamWorker();

// NRT_ERROR_TASK_FAILED carrying the pending errors of streams (each consumed), or NRT_SUCCESS.
nrtError_t ReportTaskErrors(const std::vector<std::shared_ptr<Stream>>& streams);
nrtError_t ReportTaskErrors(Stream& stream);

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_STREAM_H_

// Stream.cpp - the worker thread loop, stream-ordered waiting, and sticky task errors.
#include "Stream.h"

#include <chrono>

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>

#include "Activity.h"
#include "Capture.h"
#include "Device.h"
#include "DeviceBusy.h"
#include "Event.h"
#include "Error.h"
#include "FaultInjection.h"
#include "Log.h"

namespace npu::runtime {
namespace {

thread_local bool t_on_stream_worker = false;
// How many host threads wait for the stream this worker runs (NULL off workers).
thread_local const std::atomic<int>* t_worker_host_waiting = nullptr;
// Set by nrtSetTaskErrMsg() inside a host function, read by the worker once the function returns.
thread_local std::optional<std::string> t_task_message;

// Runs one task (a queued one, or a replayed graph's), containing everything it can throw: an
// exception escaping a worker would terminate the process, while a failed task only has to fail the
// next synchronisation.
template <typename Run>
std::optional<std::string> RunGuarded(Run&& run) {
  t_task_message.reset();
  try {
    const int code = run();
    if (code == 0) return std::nullopt;
    if (t_task_message) return std::move(*t_task_message);
    return StrCat("host function failed with code ", code);
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("host function threw an exception that is not a std::exception");
  }
}

std::optional<std::string> RunTask(Task& task) {
  return RunGuarded([&] { return task.Run(); });
}

// How long an idle worker polls for new work before it sleeps (a few op launches' worth: ops
// launched back to back then find it awake, saving a futex wake-up and a context switch per op),
// and how long a synchronising caller polls before it sleeps (a small op finishes well within it).
constexpr auto kIdlePoll = std::chrono::microseconds(50);
// How long a worker that ran out of work waits for more before running the idle hook.
constexpr auto kIdleRelease = std::chrono::milliseconds(2);
// The same after a host thread synchronised with the stream: it will work on the results on the
// CPU, so the team goes soon; not at once, because the few ops a training loop launches right
// after a sync (an accuracy from the logits, then .item()) would wait for the team's threads to
// be joined first (0.18 ms a step in the demo's loop, 0.04 ms with this grace).
constexpr auto kSyncedIdleRelease = std::chrono::microseconds(300);
constexpr auto kSyncPoll = std::chrono::microseconds(20);

// Polls `done()` until it holds or `budget` passes (reading the clock every few polls only).
template <typename Done>
bool PollFor(std::chrono::microseconds budget, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 1;; ++i) {
    if (done()) return true;
    CpuRelax();
    if (i % 32 == 0 && std::chrono::steady_clock::now() >= deadline) return done();
  }
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g s", seconds);
  return text;
}

}  // namespace

Stream::Stream(uint64_t id, int device, bool is_default, uint64_t generation, StreamOptions options)
    : id_(id), device_(device), is_default_(is_default), generation_(generation), options_(options) {
  worker_ = std::thread(&Stream::Run, this);
  worker_id_ = worker_.get_id();
  NPU_RT_LOG(kInfo, "created ", is_default ? "default " : "", name());
}

Stream::~Stream() { Shutdown(); }

std::string Stream::name() const { return StrCat("npu:", device_, " stream #", id_); }

nrtError_t Stream::RefuseWork() {
  return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, name(), " is being destroyed and accepts no more work");
}

nrtError_t Stream::EnqueueMarker(std::shared_ptr<EventRecord> record) {
  if (Idle() && !stopping_.load()) {
    record->Complete();
    return NRT_SUCCESS;
  }
  return Enqueue([record = std::move(record)] {
    record->Complete();
    return 0;
  }, /*after_count=*/true);
}

nrtError_t Stream::Synchronize() {
  if (OnWorkerThread()) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "cannot synchronize ", name(),
                       " from one of its own host functions: it would wait for itself");
  }
  const uint64_t target = queue_.Published();
  // The host waits for results and will work on them on the CPU: once out of work, the worker
  // runs its idle hook after kSyncedIdleRelease instead of kIdleRelease (so its OpenMP team is
  // gone soon after the host's CPU work starts).
  idle_hook_now_.store(true, std::memory_order_relaxed);
  auto reached = [&] { return completed_.load(std::memory_order_seq_cst) >= target; };
  if (PollFor(kSyncPoll, reached)) return NRT_SUCCESS;
  // A host thread now waits on this stream: tasks the worker starts meanwhile may use every core.
  HostWaiting waiting(host_waiting_);
  if (watched()) return WaitWatched(reached);
  sync_waiters_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t seen = done_.load(std::memory_order_seq_cst);
    if (reached()) break;
    // Ask to be woken at `target` (the lowest wins; a wake-up clears it and every sleeper asks
    // again). Seq-cst on both sides: if the worker missed the request, this check sees its count.
    uint64_t wanted = wake_at_.load(std::memory_order_seq_cst);
    while (target < wanted &&
           !wake_at_.compare_exchange_weak(wanted, target, std::memory_order_seq_cst)) {
    }
    if (reached()) break;
    done_.wait(seen, std::memory_order_seq_cst);
  }
  sync_waiters_.fetch_sub(1, std::memory_order_relaxed);
  return NRT_SUCCESS;
}

nrtError_t Stream::WaitWatched(const std::function<bool()>& reached) const {
  // Polls, so that a task stuck for good turns into an error instead of a hang.
  for (auto pause = std::chrono::microseconds(50); !reached();
       pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    if (std::optional<std::string> stuck = StuckTask()) return NPU_RT_FAIL(NRT_ERROR_TASK_TIMEOUT, *stuck);
    std::this_thread::sleep_for(pause);
  }
  return NRT_SUCCESS;
}

void Stream::WaitForEvent(EventRecord& record) {
  if (!watched()) return record.Wait();
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_upstream_ = record.stream();
  }
  record.Wait();
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_upstream_.reset();
}

nrtError_t Stream::CheckNotLost() const {
  if (options_.faults == nullptr || !options_.faults->Lost(device_)) return NRT_SUCCESS;
  return options_.faults->FailLost(device_, name());
}

void Stream::WatchNamed(const char* name, const char* site) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_since_ns_ = NowNs();
  watch_name_ = name;
  watch_site_ = site;
}

std::optional<std::string> Stream::StuckTask() const {
  std::string message;
  std::shared_ptr<Stream> upstream;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (watch_since_ns_ == 0) return std::nullopt;
    const int64_t ran = NowNs() - watch_since_ns_;
    const int64_t limit = TaskTimeoutNs();
    if (limit <= 0 || ran <= limit) return std::nullopt;
    message = StrCat(watch_name_ ? watch_name_ : "a host task", " on ", name(), " has been running for ",
                     Seconds(static_cast<double>(ran) / 1e9), ", longer than the task timeout ",
                     Seconds(static_cast<double>(limit) / 1e9), " (NPU_SIM_TASK_TIMEOUT / set_op_timeout_ms)",
                     ": it looks stuck (the stream stays busy until it finishes)");
    message += LaunchSuffix(watch_site_);
    upstream = watch_upstream_.lock();
  }
  // Outside the lock: two streams' watch locks are never held together.
  if (upstream && upstream.get() != this) {
    message += StrCat("; it waits for an event recorded on ", upstream->name(), upstream->RunningTask(3));
  }
  return message;
}

std::string Stream::RunningTask(int depth) const {
  std::string text;
  std::shared_ptr<Stream> upstream;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (watch_since_ns_ == 0) return ", which has no task running";
    text = StrCat(", where ", watch_name_ ? watch_name_ : "a host task", " has been running for ",
                  Seconds(static_cast<double>(NowNs() - watch_since_ns_) / 1e9), LaunchSuffix(watch_site_));
    upstream = watch_upstream_.lock();
  }
  if (upstream && upstream.get() != this && depth > 0) {
    text += StrCat(" and waits for an event recorded on ", upstream->name(), upstream->RunningTask(depth - 1));
  }
  return text;
}

std::optional<std::string> Stream::ApplyFaults(const char* task_name, const char* site, uint32_t matches,
                                               std::chrono::nanoseconds ran, std::optional<std::string> failure) {
  TaskFault fault = options_.faults->OnTask(device_, task_name, matches, name());
  if (fault.slow_factor > 1.0) {
    std::this_thread::sleep_for(std::chrono::duration_cast<std::chrono::nanoseconds>(
        ran * (fault.slow_factor - 1.0)));
  }
  if (fault.hang) {
    // A task that never finishes; only shutting the stream down (destroy, nrtFinalize) ends it.
    NPU_RT_LOG(kWarning, "injected hang of ", task_name ? task_name : "a host task", " on ", name());
    while (!stopping_.load(std::memory_order_seq_cst)) {
      const uint32_t seen = wake_.load(std::memory_order_seq_cst);
      if (stopping_.load(std::memory_order_seq_cst)) break;
      wake_.wait(seen, std::memory_order_seq_cst);
    }
  }
  if (failure || !fault.failure) return failure;
  *fault.failure += LaunchSuffix(site);
  return fault.failure;
}

std::optional<std::string> Stream::TakeError() {
  if (!has_error_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(error_mu_);
  has_error_.store(false, std::memory_order_relaxed);
  if (!first_error_) return std::nullopt;
  std::string message = std::move(*first_error_);
  if (later_errors_ > 0) {
    message +=
        StrCat(" (and ", later_errors_, " more failed task", later_errors_ == 1 ? "" : "s", ")");
  }
  first_error_.reset();
  later_errors_ = 0;
  return message;
}

void Stream::RunNow(Task& task) {
  std::optional<std::string> failure = RunTask(task);
  task.Reset();
  if (failure) RecordFailure(*failure);
}

void Stream::RecordFailure(std::string message) {
  NPU_RT_LOG(kError, "task failed on ", name(), ": ", message);
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_error_) {
    ++later_errors_;
  } else {
    first_error_ = std::move(message);
  }
  has_error_.store(true, std::memory_order_release);
}

void Stream::Shutdown() {
  {
    // Under the producer lock: once it is set, nothing more is published.
    TaskQueue::ProducerLock lock(queue_);
    stopping_.store(true, std::memory_order_seq_cst);
  }
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify_all();
  std::lock_guard<std::mutex> lock(join_mu_);
  if (!worker_.joinable()) return;
  // Joining itself would throw; the API rejects destroying a stream from its own host functions,
  // so this only guards against a future caller forgetting that.
  if (OnWorkerThread()) {
    worker_.detach();
    return;
  }
  worker_.join();
  std::lock_guard<std::mutex> error_lock(error_mu_);
  if (first_error_) {
    NPU_RT_LOG(kWarning, name(), " destroyed with an unreported task failure: ", *first_error_);
  }
}

void Stream::Run() {
  t_on_stream_worker = true;
  t_worker_host_waiting = &host_waiting_;
  SetCurrentDevice(generation_, device_);
  const std::string thread_name = StrCat("npu", device_, "-s", id_).substr(0, 15);
  pthread_setname_np(pthread_self(), thread_name.c_str());

  bool ran_since_idle = false;
  for (uint64_t index = 0;;) {
    if (queue_.Published() == index) {
      PollFor(kIdlePoll, [&] { return queue_.Published() != index || stopping_.load(); });
      if (queue_.Published() == index && ran_since_idle) {
        // Out of work: after a short while with none, release what the tasks left on this thread
        // (an OpenMP thread team) before the long sleep. Not at once: work that pauses for a
        // moment (a step's Python) would otherwise rebuild the team every time.
        ran_since_idle = false;
        if (nrtWorkerIdleHook hook = g_worker_idle_hook.load(std::memory_order_acquire)) {
          const bool host_synced = idle_hook_now_.exchange(false, std::memory_order_relaxed);
          SleepBeforeIdleHook(index, host_synced ? kSyncedIdleRelease : kIdleRelease);
          if (queue_.Published() == index && !stopping_.load(std::memory_order_seq_cst)) hook();
        }
        continue;
      }
      if (queue_.Published() == index) {
        if (stopping_.load(std::memory_order_seq_cst) && queue_.Published() == index) return;
        // Sleep until a producer sees the flag and bumps wake_ (seq-cst on both sides).
        const uint32_t seen = wake_.load(std::memory_order_seq_cst);
        worker_sleeping_.store(true, std::memory_order_seq_cst);
        if (queue_.Published() == index && !stopping_.load(std::memory_order_seq_cst)) {
          wake_.wait(seen, std::memory_order_seq_cst);
        }
        worker_sleeping_.store(false, std::memory_order_relaxed);
        continue;
      }
    }
    Task& task = queue_.Front();
    // Activity hook: one relaxed load when recording is off.
    const bool recorded = activity::Active() && activity::TaskStarting(id_, index);
    std::optional<std::string> failure;
    if (task.after_count) {
      // Counted first: whoever sees this marker's event done also sees the stream idle.
      retired_.store(index + 1, std::memory_order_seq_cst);
    }
    if (nrtWorkerTaskHook hook = g_worker_task_hook.load(std::memory_order_relaxed)) {
      hook(host_waiting_.load(std::memory_order_relaxed) > 0 ? 1 : 0);
    }
    const bool watched = this->watched();
    if (watched) WatchTask(task);
    busy::TaskStarted(device_);
    if (options_.faults == nullptr) {
      failure = RunTask(task);
    } else {
      const auto start = std::chrono::steady_clock::now();
      failure = RunTask(task);
      failure = ApplyFaults(task, std::chrono::steady_clock::now() - start, std::move(failure));
    }
    busy::TaskEnded(device_);
    if (watched) {
      std::lock_guard<std::mutex> lock(watch_mu_);
      watch_since_ns_ = 0;
    }
    task.Reset();  // release captures before a synchronising caller can observe completion
    if (recorded) activity::TaskFinished(failure.has_value());
    if (failure) RecordFailure(*failure);
    queue_.Pop();
    ran_since_idle = true;
    ++index;
    retired_.store(index, std::memory_order_seq_cst);
    completed_.store(index, std::memory_order_seq_cst);
    if (sync_waiters_.load(std::memory_order_seq_cst) > 0 &&
        index >= wake_at_.load(std::memory_order_seq_cst)) {
      wake_at_.store(UINT64_MAX, std::memory_order_seq_cst);
      done_.fetch_add(1, std::memory_order_seq_cst);
      done_.notify_all();
    }
  }
}

namespace {

std::optional<std::string> RunNode(const GraphNode& node) {
  return RunGuarded([&] { return node.run(); });
}

nrtActivityKind NodeKind(const GraphNode& node) {
  const std::string_view kind = node.kind;
  if (kind == "memcpy") return NRT_ACTIVITY_MEMCPY;
  if (kind == "memset") return NRT_ACTIVITY_MEMSET;
  const std::string_view name = node.name ? node.name : "";
  if (name.substr(0, 5) == "aclnn") return NRT_ACTIVITY_DEVICE_OP;
  if (name.substr(0, 7) == "kernel ") return NRT_ACTIVITY_KERNEL;
  return NRT_ACTIVITY_HOST_TASK;
}

}  // namespace

std::optional<std::string> Stream::RunGraph(const Graph& graph, const std::vector<uint64_t>& replay_seeds) {
  struct SeedScope {
    explicit SeedScope(const std::vector<uint64_t>& seeds) { t_replay_seeds = {seeds.data(), seeds.size()}; }
    ~SeedScope() { t_replay_seeds = {}; }
  } seed_scope(replay_seeds);
  const std::vector<GraphNode>& nodes = graph.nodes();
  const bool faults = options_.faults != nullptr;
  const bool watched = this->watched();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& node = nodes[i];
    std::optional<std::string> failure;
    if (!faults && !watched && !activity::Active()) {
      failure = RunNode(node);  // the replay's fast path: nothing watches the tasks one by one
    } else {
      // Watched like queued tasks: the watchdog and injected faults name the op, profilers see it.
      if (watched) WatchNamed(node.name, node.site);
      const bool recorded = activity::Active();
      const uint64_t start_ns = recorded ? activity::Now() : 0;
      const auto start = std::chrono::steady_clock::now();
      failure = RunNode(node);
      if (faults) {
        failure = ApplyFaults(node.name, node.site, options_.faults->MatchAtLaunch(node.name),
                              std::chrono::steady_clock::now() - start, std::move(failure));
      }
      if (recorded) {
        activity::NodeRan(NodeKind(node), node.name, id_, device_, start_ns, activity::Now(), failure.has_value());
      }
    }
    if (failure) {
      return StrCat(*failure, " (task ", i + 1, " of ", nodes.size(), " of graph #", graph.id(), ", replayed on ",
                    name(), ")");
    }
  }
  return std::nullopt;
}

void Stream::SleepBeforeIdleHook(uint64_t index, std::chrono::microseconds budget) {
  const uint32_t seen = wake_.load(std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(idle_mu_);
  worker_timed_.store(true, std::memory_order_seq_cst);
  worker_sleeping_.store(true, std::memory_order_seq_cst);
  idle_cv_.wait_for(lock, budget, [&] {
    return queue_.Published() != index || stopping_.load(std::memory_order_seq_cst) ||
           wake_.load(std::memory_order_seq_cst) != seen;
  });
  worker_sleeping_.store(false, std::memory_order_relaxed);
  worker_timed_.store(false, std::memory_order_relaxed);
}

bool OnAnyStreamWorker() { return t_on_stream_worker; }

std::atomic<nrtWorkerIdleHook> g_worker_idle_hook{nullptr};
std::atomic<nrtWorkerTaskHook> g_worker_task_hook{nullptr};

namespace {
// The thread of the last short launch and how many it made in a row (capped). Written only when
// the launching thread changes, and while the streak builds: one thread launching only reads them.
struct alignas(64) LauncherStreak {
  std::atomic<uintptr_t> thread{0};
  std::atomic<uint32_t> count{0};
};
LauncherStreak g_launcher;
constexpr uint32_t kSoleStreak = 16;
}  // namespace

bool SoleLauncher() {
  const auto me = static_cast<uintptr_t>(pthread_self());  // a register read, no thread-local call
  if (g_launcher.thread.load(std::memory_order_relaxed) != me) {
    g_launcher.thread.store(me, std::memory_order_relaxed);
    g_launcher.count.store(0, std::memory_order_relaxed);
    return false;
  }
  if (g_launcher.count.load(std::memory_order_relaxed) >= kSoleStreak) return true;
  g_launcher.count.fetch_add(1, std::memory_order_relaxed);
  return false;
}

nrtError_t ReportTaskErrors(Stream& stream) {
  std::optional<std::string> error = stream.TakeError();
  if (!error) return NRT_SUCCESS;
  return NPU_RT_FAIL(NRT_ERROR_TASK_FAILED, *error);
}

nrtError_t ReportTaskErrors(const std::vector<std::shared_ptr<Stream>>& streams) {
  std::string messages;
  for (const auto& stream : streams) {
    if (auto error = stream->TakeError()) messages += (messages.empty() ? "" : "; ") + *error;
  }
  if (messages.empty()) return NRT_SUCCESS;
  return NPU_RT_FAIL(NRT_ERROR_TASK_FAILED, messages);
}

}  // namespace npu::runtime

extern "C" void nrtSetTaskErrMsg(const char* message) {
  if (message == nullptr) {
    npu::runtime::t_task_message.reset();
  } else {
    npu::runtime::t_task_message = message;
  }
}

extern "C" void nrtSetWorkerIdleHook(nrtWorkerIdleHook hook) {
  npu::runtime::g_worker_idle_hook.store(hook, std::memory_order_release);
}

extern "C" int nrtOnStreamWorker(void) { return npu::runtime::OnAnyStreamWorker() ? 1 : 0; }

extern "C" int nrtWorkerHostWaiting(void) {
  const std::atomic<int>* waiting = npu::runtime::t_worker_host_waiting;
  if (waiting == nullptr) return -1;
  return waiting->load(std::memory_order_relaxed) > 0 ? 1 : 0;
}

extern "C" void nrtSetWorkerTaskHook(nrtWorkerTaskHook hook) {
  npu::runtime::g_worker_task_hook.store(hook, std::memory_order_release);
}

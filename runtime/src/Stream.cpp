// Stream.cpp - the worker thread loop, stream-ordered waiting, and sticky task errors.
#include "Stream.h"

#include <chrono>

#include <pthread.h>

#include <exception>
#include <utility>

#include "Activity.h"
#include "Device.h"
#include "Event.h"
#include "Error.h"
#include "Log.h"

namespace npu::runtime {
namespace {

thread_local bool t_on_stream_worker = false;
// Set by nrtSetTaskErrMsg() inside a host function, read by the worker once the function returns.
thread_local std::optional<std::string> t_task_message;

// Runs one task, containing everything it can throw: an exception escaping a worker would
// terminate the process, while a failed task only has to fail the next synchronisation.
std::optional<std::string> RunTask(const Task& task) {
  t_task_message.reset();
  try {
    const int code = task();
    if (code == 0) return std::nullopt;
    if (t_task_message) return std::move(*t_task_message);
    return StrCat("host function failed with code ", code);
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return std::string("host function threw an exception that is not a std::exception");
  }
}

}  // namespace

Stream::Stream(uint64_t id, int device, bool is_default, uint64_t generation)
    : id_(id), device_(device), is_default_(is_default), generation_(generation) {
  worker_ = std::thread(&Stream::Run, this);
  worker_id_ = worker_.get_id();
  NPU_RT_LOG(kInfo, "created ", is_default ? "default " : "", name());
}

Stream::~Stream() { Shutdown(); }

namespace {
// How long an idle worker polls for new work before it blocks: a few op launches' worth.
constexpr auto kIdlePoll = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

std::string Stream::name() const { return StrCat("npu:", device_, " stream #", id_); }

nrtError_t Stream::Enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, name(),
                         " is being destroyed and accepts no more work");
    }
    // Activity hook, before the worker can see the task: one relaxed load when recording is off.
    if (activity::Active()) activity::TaskEnqueued(id_, device_, enqueued_);
    queue_.push_back(std::move(task));
    ++enqueued_;
    enqueued_hint_.store(enqueued_, std::memory_order_release);
  }
  work_ready_.notify_one();
  return NRT_SUCCESS;
}

nrtError_t Stream::EnqueueMarker(std::shared_ptr<EventRecord> record) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, name(),
                       " is being destroyed and accepts no more work");
  }
  if (completed_ == enqueued_) {
    record->Complete();
  } else {
    markers_.emplace_back(enqueued_, std::move(record));
  }
  return NRT_SUCCESS;
}

nrtError_t Stream::Synchronize() {
  if (OnWorkerThread()) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "cannot synchronize ", name(),
                       " from one of its own host functions: it would wait for itself");
  }
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  work_done_.wait(lock, [&] { return completed_ >= target; });
  return NRT_SUCCESS;
}

bool Stream::Idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ == enqueued_;
}

std::optional<std::string> Stream::TakeError() {
  std::lock_guard<std::mutex> lock(mu_);
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

void Stream::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  std::lock_guard<std::mutex> lock(join_mu_);
  if (!worker_.joinable()) return;
  // Joining itself would throw; the API rejects destroying a stream from its own host functions,
  // so this only guards against a future caller forgetting that.
  if (OnWorkerThread()) {
    worker_.detach();
    return;
  }
  worker_.join();
  std::lock_guard<std::mutex> state_lock(mu_);
  if (first_error_) {
    NPU_RT_LOG(kWarning, name(), " destroyed with an unreported task failure: ", *first_error_);
  }
}

void Stream::Run() {
  t_on_stream_worker = true;
  SetCurrentDevice(generation_, device_);
  const std::string thread_name = StrCat("npu", device_, "-s", id_).substr(0, 15);
  pthread_setname_np(pthread_self(), thread_name.c_str());

  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // Poll briefly before sleeping: ops launched back to back then find the worker awake,
      // which saves a futex wake-up and a context switch per op.
      const uint64_t seen = enqueued_;
      lock.unlock();
      const auto deadline = std::chrono::steady_clock::now() + kIdlePoll;
      while (enqueued_hint_.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < deadline) {
        CpuRelax();
      }
      lock.lock();
    }
    work_ready_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // stopping, and everything enqueued has run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    const uint64_t index = completed_;  // tasks run one at a time, in enqueue order
    lock.unlock();
    // Activity hook: one relaxed load when recording is off.
    const bool recorded = activity::Active() && activity::TaskStarting(id_, index);
    std::optional<std::string> failure = RunTask(task);
    task = nullptr;  // release captures before a synchronising caller can observe completion
    if (recorded) activity::TaskFinished(failure.has_value());
    if (failure) NPU_RT_LOG(kError, "task failed on ", name(), ": ", *failure);
    lock.lock();
    if (failure) {
      if (first_error_) {
        ++later_errors_;
      } else {
        first_error_ = std::move(failure);
      }
    }
    ++completed_;
    while (!markers_.empty() && markers_.front().first <= completed_) {
      markers_.front().second->Complete();
      markers_.pop_front();
    }
    work_done_.notify_all();
  }
}

bool OnAnyStreamWorker() { return t_on_stream_worker; }

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

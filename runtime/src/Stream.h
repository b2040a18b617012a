// Stream.h - an in-order task queue run by its own worker thread, keeping the first task failure.
#ifndef NPU_RUNTIME_SRC_STREAM_H_
#define NPU_RUNTIME_SRC_STREAM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "npu/runtime.h"

namespace npu::runtime {

class EventRecord;

// Returns non-zero (or throws) on failure; the worker turns that into the stream's pending error.
using Task = std::function<int()>;

class Stream {
 public:
  // generation is the runtime's, so that the worker's current device is this stream's device.
  Stream(uint64_t id, int device, bool is_default, uint64_t generation);
  ~Stream();  // Shutdown()
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  uint64_t id() const { return id_; }
  int device() const { return device_; }
  bool is_default() const { return is_default_; }
  std::string name() const;  // "npu:0 stream #3", for messages

  // NRT_ERROR_INVALID_HANDLE once Shutdown() has begun; the task is then dropped.
  nrtError_t Enqueue(Task task);
  // Completes `record` once every task enqueued so far has completed, after the stream counts them,
  // so that a stream whose last event is done also reports itself idle.
  nrtError_t EnqueueMarker(std::shared_ptr<EventRecord> record);
  // Waits until every task enqueued before the call has run; refuses on its own worker, which
  // would wait for itself.
  nrtError_t Synchronize();
  bool Idle() const;
  uint64_t enqueued() const { return enqueued_hint_.load(std::memory_order_acquire); }
  bool OnWorkerThread() const { return std::this_thread::get_id() == worker_id_; }
  // The first failure since the last call (with a count of later ones), consumed by this call.
  std::optional<std::string> TakeError();
  // Rejects new work, lets the queue drain, joins the worker. Idempotent.
  void Shutdown();

 private:
  void Run();

  const uint64_t id_;
  const int device_;
  const bool is_default_;
  const uint64_t generation_;

  mutable std::mutex mu_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<Task> queue_;
  std::deque<std::pair<uint64_t, std::shared_ptr<EventRecord>>> markers_;  // (task count, record)
  uint64_t enqueued_ = 0;
  // enqueued_, readable without mu_: the idle worker polls it briefly before sleeping.
  std::atomic<uint64_t> enqueued_hint_{0};
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::optional<std::string> first_error_;
  uint64_t later_errors_ = 0;

  std::mutex join_mu_;  // a second Shutdown() caller must also wait for the join
  std::thread worker_;
  std::thread::id worker_id_;
};

// True on any stream's worker thread, where waiting for all streams would wait for itself.
bool OnAnyStreamWorker();

// NRT_ERROR_TASK_FAILED carrying the pending errors of streams (each consumed), or NRT_SUCCESS.
nrtError_t ReportTaskErrors(const std::vector<std::shared_ptr<Stream>>& streams);

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_STREAM_H_

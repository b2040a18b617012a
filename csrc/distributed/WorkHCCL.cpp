// WorkHCCL.cpp - completion state of a collective and the stream / host waits on it.
#include "csrc/distributed/WorkHCCL.h"

#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/distributed/StreamOrder.h"
#include "csrc/framework/DeviceTask.h"

namespace c10d_npu {

void Completion::finish(const std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    error_ = error;
  }
  cv_.notify_all();
}

void Completion::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool Completion::waitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return done_; });
}

bool Completion::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

std::string Completion::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

WorkHCCL::WorkHCCL(int rank, c10d::OpType type, uint64_t seq, std::string what, c10::Device device,
                   std::vector<at::Tensor> outputs, bool blocking_wait, bool host_wait)
    : c10d::Work(rank, type),
      seq_(seq),
      what_(std::move(what)),
      device_(device),
      outputs_(std::move(outputs)),
      blocking_wait_(blocking_wait),
      host_wait_(host_wait) {}

void WorkHCCL::markFinished(const std::string& error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) return;
    if (!error.empty()) {
      exception_ = std::make_exception_ptr(
          c10::DistBackendError(c10::SourceLocation{"hccl", __FILE__, __LINE__}, what_ + " failed: " + error));
    }
    completed_ = true;
    if (future_on_finish_) future = future_;
  }
  completion_->finish(error);  // after exception_ is set: a woken waiter finds it
  cv_.notify_all();
  if (future) {
    if (error.empty()) future->markCompleted(c10::IValue(outputs_));
    else future->setError(exception_);
  }
}

bool WorkHCCL::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkHCCL::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WorkHCCL::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> WorkHCCL::result() { return outputs_; }

bool WorkHCCL::waitFinished(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    completion_->wait();
    return true;
  }
  return completion_->waitFor(timeout);
}

void WorkHCCL::throwIfFailed() const {
  std::exception_ptr e = exception();
  if (e) std::rethrow_exception(e);
}

void WorkHCCL::blockCurrentStream() {
  throwIfFailed();
  if (isCompleted()) return;
  // A task on the caller's stream that holds the stream until the collective has finished and
  // fails it with the collective's error, so the next sync on that stream raises DistBackendError.
  c10_npu::NPUStream caller = c10_npu::getCurrentNPUStream(device_.index());
  uint64_t before = stream_order::taskCount(caller);
  at_npu::native::launchDeviceTask(caller, what_, [completion = completion_] {
    completion->wait();
    std::string error = completion->error();
    if (!error.empty()) throw std::runtime_error(error);
  });
  if (future_stream_) stream_order::noteWaitFor(caller, *future_stream_, before);
}

void WorkHCCL::synchronize() { blockCurrentStream(); }

bool WorkHCCL::wait(std::chrono::milliseconds timeout) {
  if (host_wait_ || blocking_wait_ || timeout != kNoTimeout) {
    if (!waitFinished(timeout)) {
      C10_THROW_ERROR(DistBackendError, what_ + " did not finish within the " +
                                            std::to_string(timeout.count()) + " ms given to wait()");
    }
    throwIfFailed();
    return true;
  }
  blockCurrentStream();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkHCCL::getFuture() {
  std::lock_guard<std::mutex> lock(future_mutex_);
  if (!future_ && future_stream_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{device_});
    c10::StreamGuard guard(*future_stream_);
    future_->markCompleted(c10::IValue(outputs_));
  }
  return future_;
}

void WorkHCCL::completeFutureWhenFinished() {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    future_ = future;
    future_on_finish_ = true;
    done = completed_;
  }
  if (done) {
    if (isSuccess()) future->markCompleted(c10::IValue(outputs_));
    else future->setError(exception());
  }
}

}  // namespace c10d_npu

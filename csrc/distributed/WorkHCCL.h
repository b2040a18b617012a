// WorkHCCL.h - the Work of an hccl collective, with NCCL's stream semantics: wait() makes the
// caller's current stream wait for the collective (and carries its failure to that stream), the
// future is complete on the communication stream, is_completed() says whether the data has moved.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace c10d_npu {

// Whether a collective has finished, and its error. Tasks that wait for the collective on a caller's
// stream share this, not the Work (nor the output tensors it returns).
class Completion {
 public:
  void finish(const std::string& error);  // the first call wins
  void wait();
  bool waitFor(std::chrono::milliseconds timeout);  // false if it timed out
  bool done() const;
  std::string error() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

class WorkHCCL : public c10d::Work {
 public:
  WorkHCCL(int rank, c10d::OpType type, uint64_t seq, std::string what, c10::Device device,
           std::vector<at::Tensor> outputs, bool blocking_wait, bool host_wait);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }

  // Called once, from the task that ran the collective: "" on success, else the error text.
  void markFinished(const std::string& error);
  // Host wait until finished (or `timeout`); false if it timed out.
  bool waitFinished(std::chrono::milliseconds timeout);
  // Raises the collective's error as DistBackendError if it failed.
  void throwIfFailed() const;

  const std::string& what() const { return what_; }
  // The collective finishes in `stream`'s order (the communication stream running it). NCCL style:
  // the future is complete at once, with its events on that stream; it is made when first asked
  // for, so its events sit at or after the collective.
  void completeFutureOn(const c10::Stream& stream) { future_stream_ = stream; }
  // For works finished off any stream (send / recv): completed when the transfer finishes.
  void completeFutureWhenFinished();

 private:
  const uint64_t seq_;
  const std::string what_;
  const c10::Device device_;
  std::vector<at::Tensor> outputs_;
  const bool blocking_wait_;
  const bool host_wait_;  // barrier: wait() returns once every rank has arrived
  const std::shared_ptr<Completion> completion_ = std::make_shared<Completion>();
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::optional<c10::Stream> future_stream_;
  std::mutex future_mutex_;
  bool future_on_finish_ = false;
};

}  // namespace c10d_npu

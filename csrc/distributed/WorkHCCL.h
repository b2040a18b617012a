// WorkHCCL.h - the Work of an hccl collective, with NCCL's stream semantics: wait() makes the
// caller's current stream wait for the collective (and carries its failure to that stream), the
// future is complete on the communication stream, is_completed() says whether the data has moved.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace c10d_npu {

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
  // NCCL style: the future is complete at once, with its events on `stream` (the one running the
  // collective). It is made when first asked for; its events then sit at or after the collective.
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
  std::string error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::optional<c10::Stream> future_stream_;
  std::mutex future_mutex_;
  bool future_on_finish_ = false;
};

}  // namespace c10d_npu

// GlooTransport.h - the wire under the hccl backend: PyTorch's ProcessGroupGloo (TCP, works across
// machines), fed with zero-copy CPU views of device memory. Two Gloo groups per hccl group: one for
// the data, called from the communication stream in stream order, and one for fingerprints, called
// when a collective is issued; each is called in the same order on every rank, as Gloo requires.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "csrc/distributed/P2PEngine.h"

namespace c10d_npu {

struct Deadline {
  std::chrono::steady_clock::time_point at;
  std::chrono::milliseconds total;

  static Deadline after(std::chrono::milliseconds timeout);
  std::chrono::milliseconds remaining() const;  // at least 1 ms, so Gloo reports the timeout itself
  bool passed() const { return std::chrono::steady_clock::now() >= at; }
};

using GlooIssue = std::function<c10::intrusive_ptr<c10d::Work>(std::chrono::milliseconds timeout)>;

class GlooTransport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Backend> data, c10::intrusive_ptr<c10d::Backend> meta);

  c10d::Backend& data() { return *data_; }
  c10d::Backend& meta() { return *meta_; }
  P2PEngine& p2p() { return *p2p_; }

  // Issues a data operation with the time left and waits for it; throws the transport's error.
  void run(const Deadline& deadline, const GlooIssue& issue);

  // The fingerprint exchange of one collective: an all-gather of a few integers, issued at once.
  struct Exchange {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<std::vector<at::Tensor>> outputs;
  };
  Exchange startExchange(const std::vector<int64_t>& record, int group_size, const Deadline& deadline);
  // Every rank's record; calls `on_slow` once if the peers take longer than `slow_after` to arrive.
  std::vector<std::vector<int64_t>> finishExchange(Exchange& exchange, std::chrono::milliseconds slow_after,
                                                   const std::function<void()>& on_slow);

 private:
  c10::intrusive_ptr<c10d::Backend> data_;
  c10::intrusive_ptr<c10d::Backend> meta_;
  std::shared_ptr<P2PEngine> p2p_;
};

// Waits for a Gloo work, calling on_slow once if it is not done after slow_after; rethrows its error.
void awaitWork(c10d::Work& work, std::chrono::milliseconds slow_after, const std::function<void()>& on_slow);

}  // namespace c10d_npu

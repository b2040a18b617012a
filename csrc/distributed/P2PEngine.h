// P2PEngine.h - send / recv on the Gloo groups without ever blocking a stream on the peer. Gloo
// completes a send only once the receiver has posted the matching recv, so posting happens in stream
// order (from the communication stream) and waiting happens on two threads of the group: one posts
// each recv's data once the sender's header (its dtype and size) has arrived and matches, the other
// waits for completions. A size mismatch is reported instead of overflowing the receiver's buffer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "csrc/framework/DeferredRelease.h"

namespace c10d_npu {

class P2PEngine : public std::enable_shared_from_this<P2PEngine> {
 public:
  struct Op {
    bool is_send = true;
    int peer = 0;
    int tag = 0;
    std::vector<int64_t> header;  // this side's fingerprint of the message
    at::Tensor payload;           // contiguous CPU tensor (device memory view or staging)
    std::chrono::steady_clock::time_point deadline;
    // For a recv: "" if the sender's header matches ours, otherwise the mismatch.
    std::function<std::string(const std::vector<int64_t>& sender_header)> check;
    std::function<void()> on_received;                 // copies staging back, if any
    std::function<void(const std::string&)> finished;  // "" on success, else the error
    // The device tensor in use until finished (released off this thread: DeferredRelease.h).
    at_npu::native::KeptAlive<at::Tensor> keepalive;
  };

  static std::shared_ptr<P2PEngine> create(c10::intrusive_ptr<c10d::Backend> data,
                                           c10::intrusive_ptr<c10d::Backend> meta);

  // Posts what can be posted now (sends, recv headers); never waits for the peer.
  void submit(Op op);
  // Returns once every submitted op has finished (each is bounded by its deadline).
  void waitIdle();
  // No further ops; the threads exit once the submitted ones have finished.
  void close();

 private:
  struct Pending {
    Op op;
    at::Tensor header_buffer;
    c10::intrusive_ptr<c10d::Work> header_work;
    c10::intrusive_ptr<c10d::Work> data_work;
  };

  P2PEngine(c10::intrusive_ptr<c10d::Backend> data, c10::intrusive_ptr<c10d::Backend> meta);
  void startThreads();
  void postLoop();      // recv: header arrived and matches -> post the data recv
  void completeLoop();  // waits for data completions in order
  std::shared_ptr<Pending> pop(std::deque<std::shared_ptr<Pending>>& queue);
  void push(std::deque<std::shared_ptr<Pending>>& queue, std::shared_ptr<Pending> item);

  c10::intrusive_ptr<c10d::Backend> data_;
  c10::intrusive_ptr<c10d::Backend> meta_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> to_post_;
  std::deque<std::shared_ptr<Pending>> to_complete_;
  bool started_ = false;
  bool closed_ = false;
  int running_ = 0;
  int unfinished_ = 0;  // submitted ops not yet finished
};

}  // namespace c10d_npu

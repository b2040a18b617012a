// GlooTransport.cpp - data operations and fingerprint exchanges on the two Gloo groups.
#include "csrc/distributed/GlooTransport.h"

#include <condition_variable>
#include <mutex>

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

namespace c10d_npu {

Deadline Deadline::after(std::chrono::milliseconds timeout) {
  return Deadline{std::chrono::steady_clock::now() + timeout, timeout};
}

std::chrono::milliseconds Deadline::remaining() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

GlooTransport::GlooTransport(c10::intrusive_ptr<c10d::Backend> data, c10::intrusive_ptr<c10d::Backend> meta)
    : data_(std::move(data)), meta_(std::move(meta)), p2p_(P2PEngine::create(data_, meta_)) {}

void GlooTransport::run(const Deadline& deadline, const GlooIssue& issue) {
  c10::intrusive_ptr<c10d::Work> work = issue(deadline.remaining());
  work->wait();
}

GlooTransport::Exchange GlooTransport::startExchange(const std::vector<int64_t>& record, int group_size,
                                                     const Deadline& deadline) {
  auto options = at::TensorOptions().dtype(at::kLong);
  Exchange ex;
  std::vector<at::Tensor> input{at::tensor(record, options)};
  ex.outputs.resize(1);
  for (int r = 0; r < group_size; ++r) ex.outputs[0].push_back(at::empty({static_cast<int64_t>(record.size())}, options));
  c10d::AllgatherOptions opts;
  opts.timeout = deadline.remaining();
  ex.work = meta_->allgather(ex.outputs, input, opts);
  return ex;
}

std::vector<std::vector<int64_t>> GlooTransport::finishExchange(Exchange& ex, std::chrono::milliseconds slow_after,
                                                                const std::function<void()>& on_slow) {
  awaitWork(*ex.work, slow_after, on_slow);
  std::vector<std::vector<int64_t>> records;
  for (const at::Tensor& t : ex.outputs[0]) {
    const int64_t* p = t.const_data_ptr<int64_t>();
    records.emplace_back(p, p + t.numel());
  }
  return records;
}

void awaitWork(c10d::Work& work, std::chrono::milliseconds slow_after, const std::function<void()>& on_slow) {
  struct Signal {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto signal = std::make_shared<Signal>();
  c10::intrusive_ptr<c10::ivalue::Future> future = work.getFuture();
  if (future) {
    future->addCallback([signal](c10::ivalue::Future&) {
      std::lock_guard<std::mutex> lock(signal->mutex);
      signal->done = true;
      signal->cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(signal->mutex);
    if (!signal->cv.wait_for(lock, slow_after, [&] { return signal->done; })) {
      lock.unlock();
      on_slow();
    }
  }
  work.wait();  // returns at once when done; rethrows the transport's error
}

}  // namespace c10d_npu

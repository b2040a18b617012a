// P2PEngine.cpp - header-checked point-to-point transfers over Gloo.
#include "csrc/distributed/P2PEngine.h"

#include <thread>

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

namespace c10d_npu {
namespace {

std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

std::string errorText(const std::exception& e) {
  if (auto* c10e = dynamic_cast<const c10::Error*>(&e)) return c10e->what_without_backtrace();
  return e.what();
}

// Releases the device tensors before reporting: once a wait on the transfer returns, its memory is
// the caller's again.
void finish(P2PEngine::Op& op, const std::string& error) {
  op.keepalive.reset();
  op.finished(error);
}

}  // namespace

std::shared_ptr<P2PEngine> P2PEngine::create(c10::intrusive_ptr<c10d::Backend> data,
                                             c10::intrusive_ptr<c10d::Backend> meta) {
  return std::shared_ptr<P2PEngine>(new P2PEngine(std::move(data), std::move(meta)));
}

P2PEngine::P2PEngine(c10::intrusive_ptr<c10d::Backend> data, c10::intrusive_ptr<c10d::Backend> meta)
    : data_(std::move(data)), meta_(std::move(meta)) {}

void P2PEngine::startThreads() {
  // Detached, each holding the engine: a group destroyed with transfers in flight returns at once,
  // and the threads end when those transfers finish or reach their deadline.
  auto self = shared_from_this();
  running_ = 2;
  std::thread([self] { self->postLoop(); }).detach();
  std::thread([self] { self->completeLoop(); }).detach();
  started_ = true;
}

void P2PEngine::push(std::deque<std::shared_ptr<Pending>>& queue, std::shared_ptr<Pending> item) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue.push_back(std::move(item));
  cv_.notify_all();
}

std::shared_ptr<P2PEngine::Pending> P2PEngine::pop(std::deque<std::shared_ptr<Pending>>& queue) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !queue.empty() || closed_; });
  if (queue.empty()) return nullptr;
  auto item = std::move(queue.front());
  queue.pop_front();
  return item;
}

void P2PEngine::submit(Op op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      // Reached the stream after the group was aborted: fail its Work rather than leave it pending.
      finish(op, "the process group was destroyed (aborted) before this operation ran");
      return;
    }
    if (!started_) startThreads();
    ++unfinished_;
  }
  // The op counts as unfinished until its report has run.
  op.finished = [self = shared_from_this(), report = std::move(op.finished)](const std::string& error) {
    report(error);
    std::lock_guard<std::mutex> lock(self->mutex_);
    --self->unfinished_;
    self->cv_.notify_all();
  };
  auto item = std::make_shared<Pending>();
  item->op = std::move(op);
  Op& o = item->op;
  auto options = at::TensorOptions().dtype(at::kLong);
  try {
    if (o.is_send) {
      std::vector<at::Tensor> header{at::tensor(o.header, options)};
      item->header_buffer = header[0];
      item->header_work = meta_->send(header, o.peer, o.tag);
      std::vector<at::Tensor> payload{o.payload};
      item->data_work = data_->send(payload, o.peer, o.tag);
      push(to_complete_, std::move(item));
    } else {
      std::vector<at::Tensor> header{at::empty({static_cast<int64_t>(o.header.size())}, options)};
      item->header_buffer = header[0];
      item->header_work = meta_->recv(header, o.peer, o.tag);
      push(to_post_, std::move(item));
    }
  } catch (const std::exception& e) {
    finish(item->op, errorText(e));
  }
}

void P2PEngine::postLoop() {
  while (auto item = pop(to_post_)) {
    Op& o = item->op;
    try {
      item->header_work->wait(remaining(o.deadline));
      const int64_t* h = item->header_buffer.const_data_ptr<int64_t>();
      std::string mismatch = o.check(std::vector<int64_t>(h, h + item->header_buffer.numel()));
      if (!mismatch.empty()) {
        finish(o, mismatch);
        continue;
      }
      std::vector<at::Tensor> payload{o.payload};
      item->data_work = data_->recv(payload, o.peer, o.tag);
      push(to_complete_, std::move(item));
    } catch (const std::exception& e) {
      finish(o, errorText(e));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  --running_;
  cv_.notify_all();  // the completion thread may now stop
}

void P2PEngine::completeLoop() {
  while (true) {
    std::shared_ptr<Pending> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Keep running while the posting thread may still hand over work.
      cv_.wait(lock, [&] { return !to_complete_.empty() || (closed_ && running_ == 1); });
      if (to_complete_.empty()) break;
      item = std::move(to_complete_.front());
      to_complete_.pop_front();
    }
    Op& o = item->op;
    try {
      if (item->header_work && o.is_send) item->header_work->wait(remaining(o.deadline));
      item->data_work->wait(remaining(o.deadline));
      if (o.on_received) o.on_received();
      finish(o, "");
    } catch (const std::exception& e) {
      finish(o, errorText(e));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  --running_;
}

void P2PEngine::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return unfinished_ == 0; });
}

void P2PEngine::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  cv_.notify_all();
}

}  // namespace c10d_npu

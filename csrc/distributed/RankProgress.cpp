// RankProgress.cpp - progress records in the store ("<seq> <collective>") and the missing-rank query.
#include "csrc/distributed/RankProgress.h"

#include <thread>

namespace c10d_npu {

RankProgress::RankProgress(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size) {}

std::string RankProgress::key(int rank) const { return "hccl_progress/" + std::to_string(rank); }

void RankProgress::publish(uint64_t seq, const std::string& name) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (seq <= published_) return;
  try {
    store_->set(key(rank_), std::to_string(seq) + " " + name);
    published_ = seq;
  } catch (const std::exception&) {
    // The store is gone (its host exited): the failure being reported will say so.
  }
}

std::vector<RankProgress::Missing> RankProgress::missing(uint64_t seq, std::chrono::milliseconds grace,
                                                         std::string* store_error) {
  auto until = std::chrono::steady_clock::now() + grace;
  std::vector<Missing> behind;
  while (true) {
    behind.clear();
    try {
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        std::string last;
        if (store_->check({key(r)})) last = store_->get_to_str(key(r));
        uint64_t reached = last.empty() ? 0 : std::stoull(last);
        if (reached < seq) behind.push_back({r, last});
      }
    } catch (const std::exception& e) {
      if (store_error) *store_error = e.what();
      return behind;
    }
    if (behind.empty() || std::chrono::steady_clock::now() >= until) return behind;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace c10d_npu

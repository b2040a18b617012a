// RankProgress.h - which collective each rank has reached, published through the group's store only
// when a rank is kept waiting, so that a timed-out rank can say which ranks never arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace c10d_npu {

class RankProgress {
 public:
  RankProgress(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  // "This rank is in collective #seq (name)". Cheap to call repeatedly for the same seq.
  void publish(uint64_t seq, const std::string& name) noexcept;

  // The group ranks that have not published #seq or later, waiting up to `grace` for ranks that are
  // still reporting. Each entry pairs the rank with what it last reported ("" if nothing).
  struct Missing {
    int rank;
    std::string last;
  };
  std::vector<Missing> missing(uint64_t seq, std::chrono::milliseconds grace, std::string* store_error);

 private:
  std::string key(int rank) const;

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  std::mutex mutex_;
  uint64_t published_ = 0;
};

}  // namespace c10d_npu

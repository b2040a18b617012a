// NPUActivityCollector.h - one profiling session's device activity: turns runtime recording on and off,
// drains the records and puts their times on the host profiler's clock (Unix nanoseconds).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <npu/activity.h>

namespace torch_npu::profiler {

class NPUActivityCollector {
 public:
  static NPUActivityCollector& get();

  // Starts recording on every device (records from an earlier session are discarded).
  void start();
  // Waits for recorded tasks to finish (at most NPU_PROF_FLUSH_TIMEOUT_MS, default 10 s), stops recording
  // and keeps the records, with their times converted, as the session's result.
  void stop();
  bool running() const;

  // The last stopped session's records (times in Unix ns) and what went wrong while collecting them.
  std::vector<nrtActivityRecord> records() const;
  uint64_t dropped() const;
  std::string warning() const;

  // Unix ns for a runtime timestamp, with the offset measured when the session started.
  int64_t toUnixNs(uint64_t runtime_ns) const { return static_cast<int64_t>(runtime_ns) + offset_ns_; }

 private:
  NPUActivityCollector() = default;
  void drainLocked();

  mutable std::mutex mu_;
  bool running_ = false;
  int64_t offset_ns_ = 0;
  std::vector<nrtActivityRecord> records_;
  uint64_t dropped_ = 0;
  std::string warning_;
};

}  // namespace torch_npu::profiler

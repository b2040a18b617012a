// NPUActivityCollector.cpp - runtime activity recording for a profiling session, on the host's clock.
#include "csrc/profiler/NPUActivityCollector.h"

#include <time.h>

#include <cstdlib>
#include <limits>

namespace torch_npu::profiler {
namespace {

int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Offset from the runtime's clock to the Unix clock PyTorch's profiler stamps host events with: the
// tightest of a few bracketed readings.
int64_t measureOffset() {
  int64_t best_gap = std::numeric_limits<int64_t>::max();
  int64_t offset = 0;
  for (int i = 0; i < 5; ++i) {
    const auto before = static_cast<int64_t>(nrtActivityTimestamp());
    const int64_t real = realtimeNs();
    const auto after = static_cast<int64_t>(nrtActivityTimestamp());
    if (after - before < best_gap) {
      best_gap = after - before;
      offset = real - (before + (after - before) / 2);
    }
  }
  return offset;
}

int64_t flushTimeoutMs() {
  if (const char* env = std::getenv("NPU_PROF_FLUSH_TIMEOUT_MS")) {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v >= 0) return v;
  }
  return 10000;
}

}  // namespace

NPUActivityCollector& NPUActivityCollector::get() {
  static NPUActivityCollector* collector = new NPUActivityCollector();  // used until process exit
  return *collector;
}

void NPUActivityCollector::start() {
  std::lock_guard<std::mutex> lock(mu_);
  records_.clear();
  dropped_ = 0;
  warning_.clear();
  offset_ns_ = measureOffset();
  nrtActivityEnable(0);
  running_ = true;
}

void NPUActivityCollector::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_) return;
  running_ = false;
  const int64_t timeout = flushTimeoutMs();
  if (nrtActivityFlush(timeout) != NRT_SUCCESS) {
    warning_ = std::string("device activity is incomplete: ") + nrtGetRecentErrMsg() +
               " (raise NPU_PROF_FLUSH_TIMEOUT_MS to wait longer)";
  }
  nrtActivityDisable();
  drainLocked();
  dropped_ = nrtActivityDropped();
  if (dropped_ > 0) {
    if (!warning_.empty()) warning_ += "; ";
    warning_ += std::to_string(dropped_) + " device activity records were dropped: the buffer holds 1048576";
  }
}

void NPUActivityCollector::drainLocked() {
  std::vector<nrtActivityRecord> batch(4096);
  for (;;) {
    size_t n = 0;
    if (nrtActivityDrain(batch.data(), batch.size(), &n) != NRT_SUCCESS || n == 0) break;
    for (size_t i = 0; i < n; ++i) {
      nrtActivityRecord r = batch[i];
      for (uint64_t* t : {&r.api_start_ns, &r.enqueue_ns, &r.start_ns, &r.end_ns}) {
        *t = static_cast<uint64_t>(toUnixNs(*t));
      }
      records_.push_back(r);
    }
  }
}

bool NPUActivityCollector::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

std::vector<nrtActivityRecord> NPUActivityCollector::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

uint64_t NPUActivityCollector::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::string NPUActivityCollector::warning() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warning_;
}

}  // namespace torch_npu::profiler

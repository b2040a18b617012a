// DeviceBusy.cpp - per-device busy spans: a span opens when the first of its streams' tasks starts and
// closes when the last running one ends.
#include "DeviceBusy.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace npu::runtime::busy {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Device {
  std::mutex mu;
  int running = 0;
  int64_t span_start = 0;   // while running > 0
  int64_t busy_ns = 0;      // closed spans since the last query
  int64_t queried_at = NowNs();
};

Device& Of(int device) {
  static Device devices[kMaxDevices];
  return devices[std::clamp(device, 0, kMaxDevices - 1)];
}

}  // namespace

void TaskStarted(int device) {
  Device& d = Of(device);
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.running++ == 0) d.span_start = NowNs();
}

void TaskEnded(int device) {
  Device& d = Of(device);
  std::lock_guard<std::mutex> lock(d.mu);
  if (--d.running == 0) d.busy_ns += NowNs() - d.span_start;
}

int UtilizationSinceLastQuery(int device) {
  Device& d = Of(device);
  std::lock_guard<std::mutex> lock(d.mu);
  const int64_t now = NowNs();
  int64_t busy = d.busy_ns;
  if (d.running > 0) {  // the open span counts up to now, and restarts here
    busy += now - d.span_start;
    d.span_start = now;
  }
  const int64_t period = std::max<int64_t>(now - d.queried_at, 1);
  d.busy_ns = 0;
  d.queried_at = now;
  return static_cast<int>(std::clamp<int64_t>(busy * 100 / period, 0, 100));
}

}  // namespace npu::runtime::busy

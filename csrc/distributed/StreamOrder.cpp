// StreamOrder.cpp - per caller stream: which communication stream is ordered after how many of its tasks.
#include "csrc/distributed/StreamOrder.h"

#include <mutex>
#include <unordered_map>

#include "csrc/core/NPUException.h"

namespace c10d_npu::stream_order {
namespace {

struct Ordered {
  c10::Stream comm;
  uint64_t caller_tasks;
};

std::mutex mutex;
std::unordered_map<c10::Stream, Ordered>& table() {
  static auto* t = new std::unordered_map<c10::Stream, Ordered>();  // outlives static destruction
  return *t;
}

}  // namespace

uint64_t taskCount(const c10_npu::NPUStream& stream) {
  uint64_t count = 0;
  NPU_CHECK(nrtStreamGetTaskCount(stream.handle(), &count));
  return count;
}

bool ordered(const c10_npu::NPUStream& caller, const c10_npu::NPUStream& comm, uint64_t caller_tasks) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = table().find(caller.unwrap());
  return it != table().end() && it->second.comm == comm.unwrap() && it->second.caller_tasks == caller_tasks;
}

void noteEvent(const c10_npu::NPUStream& caller, const c10_npu::NPUStream& comm, uint64_t caller_tasks) {
  std::lock_guard<std::mutex> lock(mutex);
  table().insert_or_assign(caller.unwrap(), Ordered{comm.unwrap(), caller_tasks});
}

void noteWaitFor(const c10_npu::NPUStream& caller, const c10::Stream& comm, uint64_t caller_tasks_before) {
  // Another thread may have queued on `caller` meanwhile; then the entry stays as it is (a later
  // collective records an event, as without this table).
  uint64_t after = taskCount(caller);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = table().find(caller.unwrap());
  if (it == table().end() || it->second.comm != comm) return;
  if (it->second.caller_tasks == caller_tasks_before && after == caller_tasks_before + 1) {
    it->second.caller_tasks = after;
  }
}

}  // namespace c10d_npu::stream_order

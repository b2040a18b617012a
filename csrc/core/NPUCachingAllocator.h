// NPUCachingAllocator.h - caching device allocator for npu memory (size-class pools, block splitting and
// merging, per-stream reuse, record_stream, statistics, memory fraction, out-of-memory reporting).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <functional>
#include <string>
#include <vector>

#include "csrc/core/NPUStepPlanner.h"
#include "csrc/core/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

// The registered c10::DeviceAllocator for PrivateUse1.
c10::DeviceAllocator* get();

// "1.50 GiB": sizes in out-of-memory messages.
std::string formatBytes(int64_t bytes);

void recordStream(const c10::DataPtr& ptr, NPUStream stream);
// torch_npu.erase_stream: undoes recordStream(ptr, stream) (the caller has ordered the streams itself).
void eraseStream(const c10::DataPtr& ptr, NPUStream stream);
void emptyCache();
// torch.npu.empty_virt_addr_cache: every device's emptyVirtAddrCache().
void emptyVirtAddrCache();
void setMemoryFraction(double fraction, c10::DeviceIndex device);
c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device);
// Requests refused at once by throw_on_npumalloc_oom (not part of c10's DeviceStats).
int64_t oomRejections(c10::DeviceIndex device);
void resetPeakStats(c10::DeviceIndex device);
void resetAccumulatedStats(c10::DeviceIndex device);
// A short table of the device's current / peak usage (part of the out-of-memory message).
std::string memorySummary(c10::DeviceIndex device);

// Private memory pools of a device (graph captures, torch.npu.MemPool); see
// DeviceCachingAllocator's retainPool / beginAllocateToPool / endAllocateToPool / releasePool.
void retainPool(c10::DeviceIndex device, c10::MempoolId_t id);
void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, std::function<bool(nrtStream_t)> filter);
void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id);
void releasePool(c10::DeviceIndex device, c10::MempoolId_t id, bool release_now = false);
int poolUseCount(c10::DeviceIndex device, c10::MempoolId_t id);
// Pools without users that still hold memory, and giving back their free memory (after a device sync).
bool hasDeadPools(c10::DeviceIndex device);
void releaseDeadPools(c10::DeviceIndex device);

// The end of a training step (torch_npu calls it after every optimizer step). With expandable
// segments, each device's step planner plans the next steps' addresses from the step just ended.
void endTrainingStep();
StepPlanStats stepPlanStats(c10::DeviceIndex device);

// Memory history of every device: `context_fn` gathers the stack of an allocation (called with no
// allocator lock held); `when` says which events keep one; `max_entries` bounds the event ring.
void recordHistory(bool enabled, c10::CachingDeviceAllocator::CreateContextFn context_fn,
                   size_t max_entries, c10::CachingDeviceAllocator::RecordContext when, bool clear);
struct SnapshotInfo {
  std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments;  // of every device
  std::vector<std::vector<c10::CachingDeviceAllocator::TraceEntry>> device_traces;  // oldest first
};
SnapshotInfo snapshot();

}  // namespace c10_npu::NPUCachingAllocator

// NPUCachingAllocator.h - caching device allocator for npu memory (size-class pools, block splitting and
// merging, per-stream reuse, record_stream, statistics, memory fraction, out-of-memory reporting).
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <string>

#include "csrc/core/NPUStream.h"

namespace c10_npu::NPUCachingAllocator {

// The registered c10::DeviceAllocator for PrivateUse1.
c10::DeviceAllocator* get();

void recordStream(const c10::DataPtr& ptr, NPUStream stream);
void emptyCache();
void setMemoryFraction(double fraction, c10::DeviceIndex device);
c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device);
void resetPeakStats(c10::DeviceIndex device);
void resetAccumulatedStats(c10::DeviceIndex device);
// A short table of the device's current / peak usage (part of the out-of-memory message).
std::string memorySummary(c10::DeviceIndex device);

}  // namespace c10_npu::NPUCachingAllocator

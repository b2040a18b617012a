// NPUHostAllocator.h - pinned (page-locked) host memory for fast, asynchronous host<->npu copies.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

#include "csrc/core/NPUStream.h"

namespace c10_npu {

at::HostAllocator* getPinnedHostAllocator();
bool isPinnedPtr(const void* ptr);
// Keeps a pinned block from being reused until the work now queued on `stream` is done.
void recordPinnedOnStream(const c10::Storage& storage, const NPUStream& stream);

}  // namespace c10_npu

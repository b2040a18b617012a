// NPUBlockingWait.cpp - the GIL hand-off around blocking device waits.
#include "csrc/core/NPUBlockingWait.h"

#include <atomic>

namespace c10_npu {
namespace {
std::atomic<GilRelease> g_release{nullptr};
std::atomic<GilRestore> g_restore{nullptr};
}  // namespace

void setBlockingWaitHooks(GilRelease release, GilRestore restore) {
  g_restore.store(restore);
  g_release.store(release);
}

BlockingWaitScope::BlockingWaitScope() {
  GilRelease release = g_release.load(std::memory_order_acquire);
  saved_ = release ? release() : nullptr;
}

BlockingWaitScope::~BlockingWaitScope() {
  if (saved_ != nullptr) g_restore.load(std::memory_order_acquire)(saved_);
}

}  // namespace c10_npu

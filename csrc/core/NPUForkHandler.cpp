// NPUForkHandler.cpp - what a forked child forgets so that it can use npu with a fresh runtime.
#include <pthread.h>

#include "csrc/core/NPUFunctions.h"

namespace c10_npu {

// Runs in the child right after fork(), on the only thread there. The runtime registers its own
// handler (it abandons the parent's runtime); here the adapter drops what referred to it. Nothing
// here calls the runtime: the child's runtime starts at its first use.
void forgetParentStateAfterFork() noexcept {
  forgetCurrentDeviceAfterFork();
  forgetStreamsAfterFork();
  forgetPinnedMemoryAfterFork();
  NPUCachingAllocator::forgetCachedMemoryAfterFork();
}

namespace {
struct ForkHandlerRegistration {
  ForkHandlerRegistration() { pthread_atfork(nullptr, nullptr, [] { forgetParentStateAfterFork(); }); }
} registration;
}  // namespace

}  // namespace c10_npu

// NPUSyncDebug.h - torch.npu.set_sync_debug_mode: warn about (or refuse) operations that make the host
// wait for the device, as torch.cuda's sync debug mode does.
#pragma once

#include <atomic>

namespace c10_npu {

// 0: nothing, 1: a warning at each synchronizing operation, 2: an error instead.
void setSyncDebugMode(int mode);
int syncDebugMode();

namespace detail {
extern std::atomic<int> g_sync_debug_mode;
void reportSync(const char* what);
}  // namespace detail

// Called where an operation (not an explicit synchronize) blocks the host on the device: blocking copies.
inline void warnOrErrorOnSync(const char* what) {
  if (detail::g_sync_debug_mode.load(std::memory_order_relaxed) != 0) detail::reportSync(what);
}

}  // namespace c10_npu

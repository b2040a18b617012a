// NPUSyncDebug.cpp - the sync debug mode's state and report.
#include "csrc/core/NPUSyncDebug.h"

#include <c10/util/Exception.h>

namespace c10_npu {
namespace detail {

std::atomic<int> g_sync_debug_mode{0};

void reportSync(const char* what) {
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (mode == 1) {
    TORCH_WARN("called a synchronizing NPU operation: ", what,
               " (torch.npu.set_sync_debug_mode(\"warn\") reports these; copy into pinned memory with "
               "non_blocking=True to avoid the wait)");
  } else if (mode == 2) {
    TORCH_CHECK(false, "called a synchronizing NPU operation: ", what,
                " (refused by torch.npu.set_sync_debug_mode(\"error\"))");
  }
}

}  // namespace detail

void setSyncDebugMode(int mode) {
  TORCH_CHECK_VALUE(mode >= 0 && mode <= 2, "sync debug mode must be 0 (default), 1 (warn) or 2 (error), got ",
                    mode);
  detail::g_sync_debug_mode.store(mode, std::memory_order_relaxed);
}

int syncDebugMode() { return detail::g_sync_debug_mode.load(std::memory_order_relaxed); }

}  // namespace c10_npu

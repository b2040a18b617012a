// HCCLEnv.h - torch_npu's HCCL environment variables, as the hccl backend reads them.
#pragma once

#include <chrono>
#include <optional>

namespace c10d_npu {

struct HCCLEnv {
  // HCCL_EXEC_TIMEOUT (seconds): an upper bound on how long one collective may run; the group's
  // timeout= applies when it is unset or larger.
  std::optional<std::chrono::milliseconds> exec_timeout;
  // HCCL_ASYNC_ERROR_HANDLING (default 1): print a failed collective's error on stderr as soon as it
  // happens, not only when the program next waits for it.
  bool async_error_handling = true;
  // HCCL_BLOCKING_WAIT (default 0): Work.wait() blocks the host until the collective has finished and
  // raises its error there, instead of only making the current stream wait.
  bool blocking_wait = false;
};

// Read once per process group, when it is created.
HCCLEnv readHCCLEnv();

}  // namespace c10d_npu

// ExecutionPolicy.h - the one place that decides how an op without an npu kernel runs, and how
// launches behave (task queue, launch blocking). Read once from the environment.
#pragma once

namespace at_npu::native {

struct ExecutionPolicy {
  bool strict = false;             // NPU_SIM_STRICT=1: only named device ops run on the device
  bool fallback_enabled = true;    // NPU_SIM_FALLBACK=0: strict-mode fallbacks raise instead
  bool task_queue = true;          // TASK_QUEUE_ENABLE=0: device tasks run on the calling thread
  bool launch_blocking = false;    // ASCEND_LAUNCH_BLOCKING=1: every op completes before returning
};

const ExecutionPolicy& executionPolicy();

}  // namespace at_npu::native

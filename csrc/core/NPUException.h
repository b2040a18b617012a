// NPUException.h - turns runtime error codes into PyTorch exceptions that carry the runtime's message.
#pragma once

#include <string>

#include <c10/util/Exception.h>
#include <npu/runtime.h>

namespace c10_npu {

// Device tasks of collectives (csrc/distributed/) name themselves with this prefix; their failures
// raise c10::DistBackendError (torch.distributed.DistBackendError in Python).
constexpr const char* kCollectiveTaskPrefix = "hccl ";

// Throws c10::Error (c10::OutOfMemoryError for NRT_ERROR_OUT_OF_MEMORY, c10::DistBackendError for a
// failed collective) naming the failed call.
[[noreturn]] void throwRuntimeError(nrtError_t err, const char* call, const char* file, int line);

// Raises a failed device task's message (launched synchronously, or reported at a sync).
[[noreturn]] void throwTaskError(const std::string& message, const char* file, int line);

}  // namespace c10_npu

#define NPU_CHECK(EXPR)                                                   \
  do {                                                                    \
    nrtError_t npu_check_err_ = (EXPR);                                   \
    if (C10_UNLIKELY(npu_check_err_ != NRT_SUCCESS)) {                    \
      ::c10_npu::throwRuntimeError(npu_check_err_, #EXPR, __FILE__, __LINE__); \
    }                                                                     \
  } while (0)

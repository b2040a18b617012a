// Error.h - failure reporting: every failing call records a thread-local message and logs it.
#ifndef NPU_RUNTIME_SRC_ERROR_H_
#define NPU_RUNTIME_SRC_ERROR_H_

#include <string>

#include "Log.h"
#include "npu/runtime.h"

namespace npu::runtime {

// Records message as the calling thread's recent error, logs it at error level and returns code,
// so that a failure path is a single `return NPU_RT_FAIL(...)`.
nrtError_t Fail(nrtError_t code, const char* file, int line, std::string message);

const char* ErrorName(nrtError_t code);

}  // namespace npu::runtime

#define NPU_RT_FAIL(code, ...) \
  ::npu::runtime::Fail(code, __FILE__, __LINE__, ::npu::runtime::StrCat(__VA_ARGS__))

#endif  // NPU_RUNTIME_SRC_ERROR_H_

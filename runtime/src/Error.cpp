// Error.cpp - error names and the thread-local recent error message behind nrtGetRecentErrMsg().
#include "Error.h"

#include <utility>

namespace npu::runtime {
namespace {

// Per thread because callers read it right after their own failing call, whatever other threads do.
thread_local std::string t_recent_message;

}  // namespace

nrtError_t Fail(nrtError_t code, const char* file, int line, std::string message) {
  WriteLog(LogLevel::kError, file, line, StrCat(ErrorName(code), ": ", message));
  t_recent_message = std::move(message);
  return code;
}

const char* ErrorName(nrtError_t code) {
  switch (code) {
    case NRT_SUCCESS:
      return "NRT_SUCCESS";
    case NRT_ERROR_INVALID_VALUE:
      return "NRT_ERROR_INVALID_VALUE";
    case NRT_ERROR_INVALID_DEVICE:
      return "NRT_ERROR_INVALID_DEVICE";
    case NRT_ERROR_OUT_OF_MEMORY:
      return "NRT_ERROR_OUT_OF_MEMORY";
    case NRT_ERROR_INVALID_POINTER:
      return "NRT_ERROR_INVALID_POINTER";
    case NRT_ERROR_INVALID_MEMCPY_KIND:
      return "NRT_ERROR_INVALID_MEMCPY_KIND";
    case NRT_ERROR_INVALID_HANDLE:
      return "NRT_ERROR_INVALID_HANDLE";
    case NRT_ERROR_NOT_READY:
      return "NRT_ERROR_NOT_READY";
    case NRT_ERROR_TASK_FAILED:
      return "NRT_ERROR_TASK_FAILED";
    case NRT_ERROR_NOT_INITIALIZED:
      return "NRT_ERROR_NOT_INITIALIZED";
    case NRT_ERROR_EVENT_NOT_RECORDED:
      return "NRT_ERROR_EVENT_NOT_RECORDED";
    case NRT_ERROR_TASK_TIMEOUT:
      return "NRT_ERROR_TASK_TIMEOUT";
    case NRT_ERROR_DEVICE_LOST:
      return "NRT_ERROR_DEVICE_LOST";
    case NRT_ERROR_CAPTURE_UNSUPPORTED:
      return "NRT_ERROR_CAPTURE_UNSUPPORTED";
    case NRT_ERROR_RANGE_MIN_:
    case NRT_ERROR_RANGE_MAX_:
      break;
  }
  return "NRT_ERROR_UNKNOWN";
}

}  // namespace npu::runtime

extern "C" {

const char* nrtGetRecentErrMsg(void) { return npu::runtime::t_recent_message.c_str(); }

const char* nrtGetErrorName(nrtError_t error) { return npu::runtime::ErrorName(error); }

}  // extern "C"

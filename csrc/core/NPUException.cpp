// NPUException.cpp - runtime error code -> c10 exception conversion.
#include "csrc/core/NPUException.h"

#include <string>

namespace c10_npu {

namespace {

bool isCollectiveFailure(const std::string& msg) { return msg.rfind(kCollectiveTaskPrefix, 0) == 0; }

}  // namespace

void throwTaskError(const std::string& message, const char* file, int line) {
  c10::SourceLocation loc{"device task", file, static_cast<uint32_t>(line)};
  if (isCollectiveFailure(message)) throw c10::DistBackendError(loc, message);
  throw c10::Error(loc, message);
}

void throwRuntimeError(nrtError_t err, const char* call, const char* file, int line) {
  std::string msg = nrtGetRecentErrMsg();
  if (msg.empty()) msg = "(no details)";
  if (err == NRT_ERROR_TASK_FAILED && isCollectiveFailure(msg)) {
    throw c10::DistBackendError(c10::SourceLocation{call, file, static_cast<uint32_t>(line)}, msg);
  }
  std::string text = std::string("npu runtime error ") + nrtGetErrorName(err) + ": " + msg;
  if (err == NRT_ERROR_OUT_OF_MEMORY) {
    throw c10::OutOfMemoryError(c10::SourceLocation{call, file, static_cast<uint32_t>(line)}, text);
  }
  throw c10::Error(c10::SourceLocation{call, file, static_cast<uint32_t>(line)}, text);
}

}  // namespace c10_npu

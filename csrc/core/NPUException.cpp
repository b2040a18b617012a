// NPUException.cpp - runtime error code -> c10 exception conversion.
#include "csrc/core/NPUException.h"

#include <string>

namespace c10_npu {

void throwRuntimeError(nrtError_t err, const char* call, const char* file, int line) {
  std::string msg = nrtGetRecentErrMsg();
  if (msg.empty()) msg = "(no details)";
  std::string text = std::string("npu runtime error ") + nrtGetErrorName(err) + ": " + msg;
  if (err == NRT_ERROR_OUT_OF_MEMORY) {
    throw c10::OutOfMemoryError(c10::SourceLocation{call, file, static_cast<uint32_t>(line)}, text);
  }
  throw c10::Error(c10::SourceLocation{call, file, static_cast<uint32_t>(line)}, text);
}

}  // namespace c10_npu

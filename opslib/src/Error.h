// Error.h - failure reporting: the thread-local recent message and status, the launch tag, and the
// warning log line used for custom-package problems.
#ifndef NPU_OPSLIB_SRC_ERROR_H_
#define NPU_OPSLIB_SRC_ERROR_H_

#include <cstdint>
#include <exception>
#include <new>
#include <span>
#include <sstream>
#include <string>

#include "npu/opslib.h"

namespace npu::opslib {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// "[2, 3]"; "[]" for a 0-d tensor.
std::string ShapeString(std::span<const int64_t> dims);

// Records message as the calling thread's recent error and returns status, so that a failure path
// is a single `return NOP_FAIL(status, ...)`.
aclnnStatus Fail(aclnnStatus status, std::string message);

// The status of the calling thread's latest failure (ACLNN_SUCCESS if none), for tests and logs.
aclnnStatus RecentStatus();

// The calling thread's launch tag ("" if none), appended to errors of ops launched from it.
const std::string& LaunchTag();
// The tag set with aclnnSetLaunchTagStatic (it lives for the process), or nullptr.
const char* StaticLaunchTag();

// One line on stderr in the runtime's log format, tagged NPU_OPSLIB:
//   [WARNING] NPU_OPSLIB(<pid>) <date time.ms> <file>:<line> <message>
// Printed unless ASCEND_GLOBAL_LOG_LEVEL asks for errors only (3) or nothing (4): the warnings are
// about custom op packages silently not being used, which users must see by default.
void LogWarning(const char* file, int line, const std::string& message);

// Runs the body of a C API function: no exception may cross the C boundary, so escaping ones
// become ACLNN_ERR_INNER with a message naming the API.
template <typename Body>
aclnnStatus GuardApi(const char* api, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(ACLNN_ERR_INNER, StrCat(api, ": out of host memory"));
  } catch (const std::exception& e) {
    return Fail(ACLNN_ERR_INNER, StrCat(api, ": internal error: ", e.what()));
  } catch (...) {
    return Fail(ACLNN_ERR_INNER, StrCat(api, ": internal error"));
  }
}

}  // namespace npu::opslib

#define NOP_FAIL(status, ...) ::npu::opslib::Fail(status, ::npu::opslib::StrCat(__VA_ARGS__))
#define NOP_LOG_WARNING(...) ::npu::opslib::LogWarning(__FILE__, __LINE__, ::npu::opslib::StrCat(__VA_ARGS__))

#endif  // NPU_OPSLIB_SRC_ERROR_H_

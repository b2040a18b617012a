// Log.h - the runtime's log: level and destination come from the ASCEND_* environment variables.
#ifndef NPU_RUNTIME_SRC_LOG_H_
#define NPU_RUNTIME_SRC_LOG_H_

#include <sstream>
#include <string>

namespace npu::runtime {

// Same numbering as ASCEND_GLOBAL_LOG_LEVEL; kNone silences everything.
enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kNone = 4 };

// Re-reads ASCEND_GLOBAL_LOG_LEVEL, ASCEND_SLOG_PRINT_TO_STDOUT and ASCEND_PROCESS_LOG_PATH. Runs
// on every (re)initialisation so that tests can change them between nrtFinalize() calls.
void ConfigureLogging();

bool LogEnabled(LogLevel level);
void WriteLog(LogLevel level, const char* file, int line, const std::string& message);

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace npu::runtime

// The level check comes first so that disabled debug lines cost no formatting on hot paths.
#define NPU_RT_LOG(level, ...)                                                      \
  do {                                                                              \
    if (::npu::runtime::LogEnabled(::npu::runtime::LogLevel::level)) {              \
      ::npu::runtime::WriteLog(::npu::runtime::LogLevel::level, __FILE__, __LINE__, \
                               ::npu::runtime::StrCat(__VA_ARGS__));                \
    }                                                                               \
  } while (0)

#endif  // NPU_RUNTIME_SRC_LOG_H_

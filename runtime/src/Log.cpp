// Log.cpp - formats log lines and writes them to stdout or a per-process file, or nowhere.
#include "Log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace npu::runtime {
namespace {

// Lines below this level are dropped before formatting; kNone while there is no destination.
std::atomic<int> g_threshold{static_cast<int>(LogLevel::kNone)};

struct Sink {
  std::mutex mu;
  FILE* file = nullptr;
  bool owned = false;  // stdout is borrowed, a log file is ours to close
};

// Leaked on purpose: other libraries' static destructors may still log through us at exit.
Sink& GetSink() {
  static Sink* sink = new Sink;
  return *sink;
}

LogLevel ParseLevel(const char* text) {
  if (text == nullptr || text[0] < '0' || text[0] > '4' || text[1] != '\0') {
    return LogLevel::kError;
  }
  return static_cast<LogLevel>(text[0] - '0');
}

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    default:
      return "ERROR";
  }
}

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[40];
  const size_t length = std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(text + length, sizeof(text) - length, ".%03d", static_cast<int>(millis));
  return text;
}

const char* BaseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash == nullptr ? path : slash + 1;
}

FILE* OpenLogFile(const char* dir) {
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  const std::string path = StrCat(dir, "/npu-runtime-", getpid(), ".log");
  FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    // The log itself is unavailable, so stderr is the only place this can be said.
    std::fprintf(stderr, "npu runtime: cannot open log file %s (ASCEND_PROCESS_LOG_PATH): %s\n",
                 path.c_str(), std::strerror(errno));
  }
  return file;
}

}  // namespace

void ConfigureLogging() {
  Sink& sink = GetSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  if (sink.owned) std::fclose(sink.file);
  sink.file = nullptr;
  sink.owned = false;

  const char* to_stdout = std::getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
  const char* dir = std::getenv("ASCEND_PROCESS_LOG_PATH");
  if (to_stdout != nullptr && std::strcmp(to_stdout, "1") == 0) {
    sink.file = stdout;
  } else if (dir != nullptr && dir[0] != '\0') {
    sink.file = OpenLogFile(dir);
    sink.owned = sink.file != nullptr;
  }
  const LogLevel level =
      sink.file == nullptr ? LogLevel::kNone : ParseLevel(std::getenv("ASCEND_GLOBAL_LOG_LEVEL"));
  g_threshold.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return level != LogLevel::kNone &&
         static_cast<int>(level) >= g_threshold.load(std::memory_order_relaxed);
}

void WriteLog(LogLevel level, const char* file, int line, const std::string& message) {
  if (!LogEnabled(level)) return;
  const std::string text = StrCat("[", LevelTag(level), "] NPU_RT(", getpid(), ") ", Timestamp(),
                                  " ", BaseName(file), ":", line, " ", message, "\n");
  Sink& sink = GetSink();
  std::lock_guard<std::mutex> lock(sink.mu);
  if (sink.file == nullptr) return;
  std::fwrite(text.data(), 1, text.size(), sink.file);
  // Flushed per line so that a crash or an abort keeps the lines that led to it.
  std::fflush(sink.file);
}

}  // namespace npu::runtime

// Error.cpp - thread-local recent error and launch tag behind aclnnGetRecentErrMsg /
// aclnnSetLaunchTag, and the stderr warning line.
#include "Error.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <utility>

namespace npu::opslib {
namespace {

// Per thread: callers read the message right after their own failing call, whatever other
// threads do, and the launch tag describes the launching thread's current Python line.
thread_local std::string t_recent_message;
thread_local aclnnStatus t_recent_status = ACLNN_SUCCESS;
// The launch tag in one thread-local object: every launch sets it (one thread-local lookup, not two).
struct LaunchTagState {
  const char* static_tag = nullptr;  // lives for the process; preferred when set
  std::string tag;                   // a formatted tag, when static_tag is not set
};
thread_local LaunchTagState t_tag;

bool WarningsEnabled() {
  const char* level = std::getenv("ASCEND_GLOBAL_LOG_LEVEL");
  return level == nullptr || level[0] < '3' || level[0] > '4' || level[1] != '\0';
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

}  // namespace

std::string ShapeString(std::span<const int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

aclnnStatus Fail(aclnnStatus status, std::string message) {
  t_recent_message = std::move(message);
  t_recent_status = status;
  return status;
}

aclnnStatus RecentStatus() { return t_recent_status; }

const std::string& LaunchTag() { return t_tag.tag; }

const char* StaticLaunchTag() { return t_tag.static_tag; }

void LogWarning(const char* file, int line, const std::string& message) {
  if (!WarningsEnabled()) return;
  const std::string text = StrCat("[WARNING] NPU_OPSLIB(", getpid(), ") ", Timestamp(), " ",
                                  BaseName(file), ":", line, " ", message, "\n");
  // One write so that concurrent lines do not interleave.
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace npu::opslib

extern "C" {

const char* aclnnGetRecentErrMsg(void) { return npu::opslib::t_recent_message.c_str(); }

aclnnStatus aclnnSetRecentErrMsg(aclnnStatus status, const char* message) {
  try {
    return npu::opslib::Fail(status, message == nullptr ? "" : message);
  } catch (...) {
    return status;  // out of host memory: the status still tells the caller it failed
  }
}

void aclnnSetLaunchTagStatic(const char* tag) {
  npu::opslib::LaunchTagState& state = npu::opslib::t_tag;
  state.static_tag = (tag != nullptr && *tag != '\0') ? tag : nullptr;
  if (!state.tag.empty()) state.tag.clear();
}

void aclnnSetLaunchTag(const char* tag) {
  npu::opslib::LaunchTagState& state = npu::opslib::t_tag;
  state.static_tag = nullptr;
  try {
    if (tag == nullptr) {
      state.tag.clear();
    } else {
      state.tag = tag;
    }
  } catch (...) {
    state.tag.clear();  // out of memory: a missing tag beats a wrong one
  }
}

}  // extern "C"

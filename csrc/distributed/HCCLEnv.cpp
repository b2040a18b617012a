// HCCLEnv.cpp - parsing of the HCCL_* environment variables (bad values raise, naming the variable).
#include "csrc/distributed/HCCLEnv.h"

#include <cstdlib>
#include <string>

#include <c10/util/Exception.h>

namespace c10d_npu {
namespace {

std::optional<long> readInteger(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return std::nullopt;
  char* end = nullptr;
  long value = std::strtol(raw, &end, 10);
  TORCH_CHECK(end != raw && *end == '\0' && value >= 0, name, "=", raw,
              " is not valid: expected a non-negative integer");
  return value;
}

}  // namespace

HCCLEnv readHCCLEnv() {
  HCCLEnv env;
  if (auto seconds = readInteger("HCCL_EXEC_TIMEOUT"); seconds && *seconds > 0) {
    env.exec_timeout = std::chrono::milliseconds(*seconds * 1000);
  }
  if (auto v = readInteger("HCCL_ASYNC_ERROR_HANDLING")) env.async_error_handling = *v != 0;
  if (auto v = readInteger("HCCL_BLOCKING_WAIT")) env.blocking_wait = *v != 0;
  return env;
}

}  // namespace c10d_npu

// ExecutionPolicy.cpp - environment -> execution policy.
#include "csrc/framework/ExecutionPolicy.h"

#include <cstdlib>
#include <string>

namespace at_npu::native {
namespace {

bool envFlag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::string(v) != "0";
}

}  // namespace

const ExecutionPolicy& executionPolicy() {
  static const ExecutionPolicy policy = [] {
    ExecutionPolicy p;
    p.strict = envFlag("NPU_SIM_STRICT", false);
    p.fallback_enabled = envFlag("NPU_SIM_FALLBACK", true);
    p.task_queue = envFlag("TASK_QUEUE_ENABLE", true);
    p.launch_blocking = envFlag("ASCEND_LAUNCH_BLOCKING", false);
    return p;
  }();
  return policy;
}

}  // namespace at_npu::native

// OpStats.h - per-op counters of how each op ran on npu (torch.npu.op_stats()).
#pragma once

#include <ATen/core/operator_name.h>

#include <array>
#include <atomic>
#include <map>
#include <string>

namespace at_npu::native {

enum class OpPath { kDeviceOp = 0, kGeneric = 1, kGenericInline = 2, kFallback = 3 };

struct OpCounters {
  std::atomic<uint64_t> count[4] = {};
};

// Counters of one op (stable address; look it up once per op and keep the reference).
OpCounters& opCounters(const c10::OperatorName& name);
OpCounters& opCounters(const std::string& name);
inline void countOp(OpCounters& c, OpPath path) {
  c.count[static_cast<int>(path)].fetch_add(1, std::memory_order_relaxed);
}

// name -> {device_op, generic, generic_inline, fallback}
std::map<std::string, std::array<uint64_t, 4>> opStatsSnapshot();
void resetOpStats();

}  // namespace at_npu::native

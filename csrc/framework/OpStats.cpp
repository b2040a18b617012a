// OpStats.cpp - the op counter table.
#include "csrc/framework/OpStats.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace at_npu::native {
namespace {

std::mutex& tableMutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<std::string, std::unique_ptr<OpCounters>>& table() {
  static auto* t = new std::unordered_map<std::string, std::unique_ptr<OpCounters>>();
  return *t;
}

}  // namespace

OpCounters& opCounters(const std::string& name) {
  std::lock_guard<std::mutex> lock(tableMutex());
  auto& slot = table()[name];
  if (!slot) slot = std::make_unique<OpCounters>();
  return *slot;
}

OpCounters& opCounters(const c10::OperatorName& name) {
  return opCounters(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
}

std::map<std::string, std::array<uint64_t, 4>> opStatsSnapshot() {
  std::lock_guard<std::mutex> lock(tableMutex());
  std::map<std::string, std::array<uint64_t, 4>> out;
  for (auto& [name, c] : table()) {
    std::array<uint64_t, 4> v{};
    for (int i = 0; i < 4; ++i) v[i] = c->count[i].load(std::memory_order_relaxed);
    if (v[0] + v[1] + v[2] + v[3] > 0) out[name] = v;
  }
  return out;
}

void resetOpStats() {
  std::lock_guard<std::mutex> lock(tableMutex());
  for (auto& [name, c] : table()) {
    for (auto& x : c->count) x.store(0, std::memory_order_relaxed);
  }
}

}  // namespace at_npu::native

// HostRegister.cpp - nrtHostRegister / nrtHostUnregister: existing host memory registered as pinned
// (the software NPU's device memory is host memory, so registering only changes how copies treat it).
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include "HostRegister.h"

#include "Error.h"
#include "npu/runtime.h"

namespace npu::runtime {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, size_t> ranges;  // base -> size
};

Registry& registry() {
  static Registry* r = new Registry();  // used until exit, from any thread
  return *r;
}

}  // namespace

bool IsRegisteredHostPtr(const void* ptr) {
  Registry& r = registry();
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.ranges.upper_bound(p);
  if (it == r.ranges.begin()) return false;
  --it;
  return p < it->first + it->second;
}

}  // namespace npu::runtime

extern "C" {

nrtError_t nrtHostRegister(void* ptr, size_t size, uint32_t flags) {
  if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostRegister: ptr is NULL");
  if (size == 0) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostRegister: size is 0");
  constexpr uint32_t known = NRT_HOST_REGISTER_MAPPED | NRT_HOST_REGISTER_PINNED;
  if (flags == 0 || (flags & ~known) != 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostRegister: flags ", flags,
                       " must be NRT_HOST_REGISTER_PINNED (0x10000000), NRT_HOST_REGISTER_MAPPED (0x2) or both");
  }
  auto& r = npu::runtime::registry();
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto next = r.ranges.lower_bound(base);
  const bool overlaps_next = next != r.ranges.end() && next->first < base + size;
  const bool overlaps_prev = next != r.ranges.begin() && std::prev(next)->first + std::prev(next)->second > base;
  if (overlaps_next || overlaps_prev) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostRegister: [", ptr, ", +", size,
                       ") overlaps memory that is already registered; unregister it first");
  }
  r.ranges.emplace(base, size);
  return NRT_SUCCESS;
}

nrtError_t nrtHostUnregister(void* ptr) {
  if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostUnregister: ptr is NULL");
  auto& r = npu::runtime::registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.ranges.erase(reinterpret_cast<uintptr_t>(ptr)) == 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostUnregister: ", ptr,
                       " is not the base of memory registered with nrtHostRegister");
  }
  return NRT_SUCCESS;
}

}  // extern "C"

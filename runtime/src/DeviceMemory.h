// DeviceMemory.h - bounded device allocations and pinned host blocks, found by any inner address.
#ifndef NPU_RUNTIME_SRC_DEVICE_MEMORY_H_
#define NPU_RUNTIME_SRC_DEVICE_MEMORY_H_

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "AddressMap.h"
#include "npu/runtime.h"

namespace npu::runtime {

// Block::device of pinned host memory, which no capacity bounds.
inline constexpr int kPinnedHost = -1;

// Device and pinned host blocks share one map so that a single lookup tells a copy where each of
// its pointers lives.
class DeviceMemory {
 public:
  DeviceMemory(int device_count, size_t capacity);
  ~DeviceMemory();  // unmaps whatever is still allocated
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // device is an index, or kPinnedHost. Each block is its own lazily committed mapping.
  nrtError_t Allocate(int device, size_t size, void** ptr);
  // Unmaps the block starting at ptr if it is of the asked kind; nullopt (and nothing changed)
  // otherwise, leaving the message to the caller, which knows the API.
  std::optional<Block> Release(void* ptr, bool pinned_host);

  // The live block containing p, if any; copied out because another thread may free it.
  std::optional<Block> Find(const void* p) const;
  size_t UsedBytes(int device) const;
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  AddressMap blocks_;
  std::vector<size_t> used_;  // mapped bytes per device
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_DEVICE_MEMORY_H_

// DeviceMemory.h - bounded device allocations and pinned host blocks, found by any inner address.
#ifndef NPU_RUNTIME_SRC_DEVICE_MEMORY_H_
#define NPU_RUNTIME_SRC_DEVICE_MEMORY_H_

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "AddressMap.h"
#include "HostMemory.h"
#include "npu/runtime.h"

namespace npu::runtime {

// Block::device of pinned host memory, which no capacity bounds.
inline constexpr int kPinnedHost = -1;

// A reserved address range of one device; `mapped` holds its mapped runs (offset -> length), kept
// merged so that adjacent mapped pages form one run.
struct Reservation {
  char* base;
  size_t size;
  int device;
  std::map<size_t, size_t> mapped;
  size_t mapped_bytes = 0;
};

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

  // Address reservations (see nrtReserveMemAddress); sizes and pointers are page-aligned and
  // checked by the C API before these are called.
  nrtError_t Reserve(int device, size_t size, void** ptr);
  nrtError_t ReleaseReservation(void* ptr);
  nrtError_t Map(void* ptr, size_t size);
  nrtError_t Unmap(void* ptr, size_t size);

  // The live block containing p, if any, or the mapped run of a reservation that contains it;
  // copied out because another thread may free it.
  std::optional<Block> Find(const void* p) const;
  size_t UsedBytes(int device) const;
  // Bytes the host can still back as device memory (HostMemory.h) on a fresh reading, and the limit
  // that bounds it.
  size_t HostHeadroom(size_t* total = nullptr);
  bool IsReservation(const void* p) const;  // inside a reserved range (mapped or not)
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  // Bumped (under mu_) by every change that can shrink or move a block's valid range, so that
  // Find() may answer from a per-thread cache of the last block it found while it is unchanged.
  // Starts at a value no other DeviceMemory used, so a cache entry never matches a later runtime.
  std::atomic<uint64_t> epoch_;
  mutable std::mutex mu_;
  AddressMap blocks_;
  std::map<uintptr_t, Reservation> reservations_;  // by base address
  std::vector<size_t> used_;  // mapped bytes per device
  size_t pinned_used_ = 0;    // mapped bytes of pinned host blocks
  HostBudget host_;           // device and pinned memory are host memory: mu_ held to use it

  std::optional<Block> FindLocked(const void* p) const;
  // The reservation containing p, or nullptr; mu_ held.
  Reservation* FindReservation(const void* p);
  const Reservation* FindReservation(const void* p) const;
  // Capacity accounting shared by nrtMalloc, nrtMallocHost and nrtMapMem; mu_ held.
  nrtError_t Account(int device, size_t size, size_t mapped_size);
  size_t MappedTotal() const;  // mu_ held
  size_t TouchedBytes() const;  // resident bytes of device and pinned memory (mincore); mu_ held
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_DEVICE_MEMORY_H_

// DeviceMemory.cpp - bounded device allocations, pinned host memory, and the memory C API.
#include "DeviceMemory.h"
#include "HostRegister.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "Error.h"
#include "FaultInjection.h"
#include "Log.h"
#include "Runtime.h"

namespace npu::runtime {
namespace {

// 0 when size cannot be rounded without overflowing, which no capacity can satisfy anyway.
size_t RoundUpToPages(size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (size > SIZE_MAX - page) return 0;
  return (size + page - 1) / page * page;
}

std::string Where(int device) {
  return device == kPinnedHost ? std::string("pinned host") : StrCat("npu:", device);
}

}  // namespace

DeviceMemory::DeviceMemory(int device_count, size_t capacity)
    : capacity_(capacity), used_(static_cast<size_t>(device_count), 0) {
  static std::atomic<uint64_t> instances{0};
  epoch_.store((instances.fetch_add(1) + 1) << 40);
}

DeviceMemory::~DeviceMemory() {
  for (const Block& block : blocks_.TakeAll()) munmap(block.base, block.mapped_size);
  for (const auto& [base, reservation] : reservations_) munmap(reservation.base, reservation.size);
}

size_t DeviceMemory::MappedTotal() const {
  size_t total = pinned_used_;
  for (size_t used : used_) total += used;
  return total;
}

nrtError_t DeviceMemory::Account(int device, size_t size, size_t mapped_size) {
  size_t& used = device == kPinnedHost ? pinned_used_ : used_[device];
  if (device == kPinnedHost && mapped_size == 0) return NRT_SUCCESS;  // too large: mapping it fails
  // Reserved before mapping so that concurrent allocations cannot overshoot the capacity.
  if (device != kPinnedHost && (mapped_size == 0 || mapped_size > capacity_ - used)) {
    return NPU_RT_FAIL(
        NRT_ERROR_OUT_OF_MEMORY, "npu:", device, " out of memory: tried to allocate ",
        FormatBytes(size), " (", size, " bytes) with ", FormatBytes(used), " (", used,
        " bytes) in use of ", FormatBytes(capacity_), " (", capacity_,
        " bytes) capacity; free device memory or set NPU_SIM_MEMORY to raise the limit");
  }
  const size_t mapped = MappedTotal();
  const auto touched = [this] { return TouchedBytes(); };
  if (mapped_size > host_.Headroom(mapped, touched, mapped_size)) {
    return NPU_RT_FAIL(
        NRT_ERROR_OUT_OF_MEMORY, Where(device), " out of memory: ", host_.Explain(mapped_size, mapped, touched),
        device == kPinnedHost ? std::string()
                              : StrCat(" (npu:", device, " has ", FormatBytes(capacity_ - used), " of its ",
                                       FormatBytes(capacity_), " capacity free)"),
        "; free device or host memory, or use fewer or smaller devices (NPU_SIM_MEMORY)");
  }
  used += mapped_size;
  return NRT_SUCCESS;
}

size_t DeviceMemory::HostHeadroom(size_t* total) {
  std::lock_guard<std::mutex> lock(mu_);
  return host_.Headroom(MappedTotal(), [this] { return TouchedBytes(); }, /*request=*/0, /*fresh=*/true, total);
}

namespace {
// Bytes of [base, base + size) whose pages are resident.
size_t ResidentIn(const void* base, size_t size) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (size == 0) return 0;
  std::vector<unsigned char> resident((size + page - 1) / page);
  if (mincore(const_cast<void*>(base), size, resident.data()) != 0) return size;  // unknown: assume touched
  size_t pages = 0;
  for (unsigned char r : resident) pages += r & 1;
  return pages * page;
}
}  // namespace

size_t DeviceMemory::TouchedBytes() const {
  size_t touched = 0;
  blocks_.ForEach([&](const Block& block) { touched += ResidentIn(block.base, block.mapped_size); });
  for (const auto& [base, reservation] : reservations_) {
    for (const auto& [offset, length] : reservation.mapped) touched += ResidentIn(reservation.base + offset, length);
  }
  return touched;
}

nrtError_t DeviceMemory::Allocate(int device, size_t size, void** ptr) {
  *ptr = nullptr;
  if (size == 0) return NRT_SUCCESS;
  const bool bounded = device != kPinnedHost;
  const size_t mapped_size = RoundUpToPages(size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (nrtError_t error = Account(device, size, mapped_size)) return error;
  }
  void* base = mapped_size == 0 ? MAP_FAILED
                                : mmap(nullptr, mapped_size, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    const int error = mapped_size == 0 ? ENOMEM : errno;
    {
      std::lock_guard<std::mutex> lock(mu_);
      (bounded ? used_[device] : pinned_used_) -= mapped_size;
    }
    return NPU_RT_FAIL(NRT_ERROR_OUT_OF_MEMORY, "cannot map ", FormatBytes(size), " (", size,
                       " bytes) of ", Where(device), " memory: ", std::strerror(error),
                       "; the host is out of address space or memory");
  }
  size_t used = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.Insert(Block{base, size, mapped_size, device});
    if (bounded) used = used_[device];
  }
  NPU_RT_LOG(kDebug, Where(device), " allocated ", size, " bytes at ", base,
             bounded ? StrCat("; ", used, " of ", capacity_, " bytes in use") : "");
  *ptr = base;
  return NRT_SUCCESS;
}

std::optional<Block> DeviceMemory::Release(void* ptr, bool pinned_host) {
  std::optional<Block> block;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Block* found = blocks_.Find(ptr);
    if (found == nullptr || found->base != ptr || (found->device == kPinnedHost) != pinned_host) {
      return std::nullopt;
    }
    block = blocks_.Erase(ptr);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    (pinned_host ? pinned_used_ : used_[block->device]) -= block->mapped_size;
  }
  // Unmapped outside the lock: returning many touched pages to the kernel takes a while.
  munmap(block->base, block->mapped_size);
  NPU_RT_LOG(kDebug, Where(block->device), " freed ", block->size, " bytes at ", ptr);
  return block;
}

namespace {
struct FoundBlock {
  const DeviceMemory* owner = nullptr;
  uint64_t epoch = 0;
  Block block{};
};
thread_local FoundBlock t_found[2];
}  // namespace

std::optional<Block> DeviceMemory::Find(const void* p) const {
  // Copies and op checks look up the same few blocks over and over.
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  for (const FoundBlock& f : t_found) {
    if (f.owner == this && f.epoch == epoch &&
        static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(f.block.base)) <
            f.block.size) {
      return f.block;
    }
  }
  std::optional<Block> found = FindLocked(p);
  if (found) {
    t_found[1] = t_found[0];
    t_found[0] = FoundBlock{this, epoch, *found};
  }
  return found;
}

std::optional<Block> DeviceMemory::FindLocked(const void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (const Block* block = blocks_.Find(p)) return *block;
  const Reservation* reservation = FindReservation(p);
  if (reservation == nullptr) return std::nullopt;
  const size_t offset = static_cast<size_t>(static_cast<const char*>(p) - reservation->base);
  auto run = reservation->mapped.upper_bound(offset);
  if (run == reservation->mapped.begin()) return std::nullopt;
  --run;
  if (offset - run->first >= run->second) return std::nullopt;
  return Block{reservation->base + run->first, run->second, run->second, reservation->device};
}

size_t DeviceMemory::UsedBytes(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_[device];
}

namespace {

// Explains why ptr could not be freed as `pinned_host` memory, pointing at the right call.
nrtError_t FailFree(const DeviceMemory& memory, const void* ptr, bool pinned_host) {
  const char* api = pinned_host ? "nrtFreeHost" : "nrtFree";
  const std::optional<Block> block = memory.Find(ptr);
  if (!pinned_host && memory.IsReservation(ptr)) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, api, ": ", ptr,
                       " is a reserved address range; release it with nrtReleaseMemAddress");
  }
  if (!block) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, api, ": ", ptr, " is not a live ",
                       pinned_host ? "pinned host" : "device",
                       " allocation: it was already freed, or did not come from ",
                       pinned_host ? "nrtMallocHost" : "nrtMalloc");
  }
  if ((block->device == kPinnedHost) != pinned_host) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, api, ": ", ptr, " is ", Where(block->device),
                       " memory; free it with ", pinned_host ? "nrtFree" : "nrtFreeHost");
  }
  return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, api, ": ", ptr, " lies inside the ",
                     Where(block->device), " allocation at ", block->base, " (", block->size,
                     " bytes) but is not its start; free the pointer the allocation returned");
}

}  // namespace
}  // namespace npu::runtime

using npu::runtime::Runtime;

extern "C" {

nrtError_t nrtMalloc(void** ptr, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtMalloc: ptr is NULL");
    if (rt.faults() != nullptr) {
      if (nrtError_t error = rt.faults()->OnAllocate(rt.current_device(), size)) return error;
    }
    return rt.memory().Allocate(rt.current_device(), size, ptr);
  });
}

nrtError_t nrtFree(void* ptr) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr || rt.memory().Release(ptr, /*pinned_host=*/false)) return NRT_SUCCESS;
    return npu::runtime::FailFree(rt.memory(), ptr, /*pinned_host=*/false);
  });
}

nrtError_t nrtMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (free_bytes == nullptr || total_bytes == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE,
                         "nrtMemGetInfo: free_bytes or total_bytes is NULL");
    }
    *total_bytes = rt.memory().capacity();
    // What the device could still allocate: its own capacity, and what the host can back.
    *free_bytes = std::min(*total_bytes - rt.memory().UsedBytes(rt.current_device()), rt.memory().HostHeadroom());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtHostMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (free_bytes == nullptr || total_bytes == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtHostMemGetInfo: free_bytes or total_bytes is NULL");
    }
    *free_bytes = rt.memory().HostHeadroom(total_bytes);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtPointerGetDevice(const void* ptr, int32_t* device) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (device == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtPointerGetDevice: device is NULL");
    }
    const auto block = rt.memory().Find(ptr);
    if (!block || block->device == npu::runtime::kPinnedHost) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, "nrtPointerGetDevice: ", ptr,
                         " is not inside a live device allocation");
    }
    *device = block->device;
    return NRT_SUCCESS;
  });
}

nrtError_t nrtPointerGetRange(const void* ptr, int32_t* device, void** base, size_t* size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (device == nullptr || base == nullptr || size == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtPointerGetRange: device, base or size is NULL");
    }
    const auto block = rt.memory().Find(ptr);
    if (!block || block->device == npu::runtime::kPinnedHost) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, "nrtPointerGetRange: ", ptr,
                         " is not inside a live device allocation");
    }
    *device = block->device;
    *base = block->base;
    *size = block->size;
    return NRT_SUCCESS;
  });
}

nrtError_t nrtMallocHost(void** ptr, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtMallocHost: ptr is NULL");
    return rt.memory().Allocate(npu::runtime::kPinnedHost, size, ptr);
  });
}

nrtError_t nrtFreeHost(void* ptr) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr || rt.memory().Release(ptr, /*pinned_host=*/true)) return NRT_SUCCESS;
    return npu::runtime::FailFree(rt.memory(), ptr, /*pinned_host=*/true);
  });
}

int nrtIsPinnedHostPtr(const void* ptr) {
  try {
    npu::runtime::RuntimeRef ref;
    if (ref.get() == nullptr || ptr == nullptr) return 0;
    const auto block = ref.get()->memory().Find(ptr);
    if (block) return block->device == npu::runtime::kPinnedHost ? 1 : 0;
    return npu::runtime::IsRegisteredHostPtr(ptr) ? 1 : 0;
  } catch (...) {
    return 0;  // an int answer has no room for an error; start-up failing means "no"
  }
}

}  // extern "C"

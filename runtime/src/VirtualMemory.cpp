// VirtualMemory.cpp - reserved address ranges whose pages are mapped and unmapped on demand (the
// runtime side of expandable segments), and their C API.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "DeviceMemory.h"
#include "Error.h"
#include "FaultInjection.h"
#include "Log.h"
#include "Runtime.h"

namespace npu::runtime {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

bool PageAligned(uintptr_t value) { return value % PageSize() == 0; }

// Replaces [p, p + size) of a reservation with fresh pages that are accessible (map) or not
// (unmap). MAP_FIXED over our own reservation: the range stays ours whatever happens.
bool Remap(char* p, size_t size, bool accessible) {
  const int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  return mmap(p, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) !=
         MAP_FAILED;
}

// Records [offset, offset + size) as mapped, merging it with the runs it touches.
void AddRun(Reservation& r, size_t offset, size_t size) {
  size_t start = offset;
  size_t length = size;
  auto next = r.mapped.lower_bound(start);
  if (next != r.mapped.end() && next->first == start + length) {
    length += next->second;
    next = r.mapped.erase(next);
  }
  if (next != r.mapped.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      r.mapped.erase(prev);
    }
  }
  r.mapped.emplace(start, length);
  r.mapped_bytes += size;
}

// Removes [offset, offset + size), which lies inside one mapped run, splitting that run.
void RemoveRun(Reservation& r, size_t offset, size_t size) {
  auto run = std::prev(r.mapped.upper_bound(offset));
  const size_t run_start = run->first;
  const size_t run_end = run->first + run->second;
  r.mapped.erase(run);
  if (offset > run_start) r.mapped.emplace(run_start, offset - run_start);
  if (offset + size < run_end) r.mapped.emplace(offset + size, run_end - offset - size);
  r.mapped_bytes -= size;
}

}  // namespace

Reservation* DeviceMemory::FindReservation(const void* p) {
  return const_cast<Reservation*>(std::as_const(*this).FindReservation(p));
}

const Reservation* DeviceMemory::FindReservation(const void* p) const {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin()) return nullptr;
  --it;
  return address - it->first < it->second.size ? &it->second : nullptr;
}

bool DeviceMemory::IsReservation(const void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FindReservation(p) != nullptr;
}

nrtError_t DeviceMemory::Reserve(int device, size_t size, void** ptr) {
  void* base = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return NPU_RT_FAIL(NRT_ERROR_OUT_OF_MEMORY, "nrtReserveMemAddress: cannot reserve ",
                       FormatBytes(size), " of address space for npu:", device, ": ",
                       std::strerror(errno));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    reservations_.emplace(reinterpret_cast<uintptr_t>(base),
                          Reservation{static_cast<char*>(base), size, device, {}});
  }
  NPU_RT_LOG(kDebug, "npu:", device, " reserved ", size, " bytes of address space at ", base);
  *ptr = base;
  return NRT_SUCCESS;
}

nrtError_t DeviceMemory::ReleaseReservation(void* ptr) {
  Reservation reservation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reservations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == reservations_.end()) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_POINTER, "nrtReleaseMemAddress: ", ptr,
                         FindReservation(ptr) ? " lies inside a reservation but is not its start"
                                              : " is not a live reservation from nrtReserveMemAddress");
    }
    reservation = std::move(it->second);
    reservations_.erase(it);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    used_[reservation.device] -= reservation.mapped_bytes;
  }
  munmap(reservation.base, reservation.size);
  NPU_RT_LOG(kDebug, "npu:", reservation.device, " released the reservation at ", ptr, " (",
             reservation.mapped_bytes, " bytes were still mapped)");
  return NRT_SUCCESS;
}

nrtError_t DeviceMemory::Map(void* ptr, size_t size) {
  char* p = static_cast<char*>(ptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Reservation* r = FindReservation(p);
    if (r == nullptr || size > r->size - static_cast<size_t>(p - r->base)) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtMapMem: [", ptr, ", +", size,
                         ") does not lie inside one reservation from nrtReserveMemAddress");
    }
    const size_t offset = static_cast<size_t>(p - r->base);
    auto next = r->mapped.lower_bound(offset);
    const bool overlaps_next = next != r->mapped.end() && next->first < offset + size;
    const bool overlaps_prev = next != r->mapped.begin() &&
                               std::prev(next)->first + std::prev(next)->second > offset;
    if (overlaps_next || overlaps_prev) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtMapMem: [", ptr, ", +", size,
                         ") overlaps pages that are already mapped; unmap them first");
    }
    if (nrtError_t error = Account(r->device, size, size)) return error;
    // Recorded before the pages exist, so that a concurrent call cannot map them twice.
    AddRun(*r, offset, size);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  // Mapped outside the lock: many pages take a while, and the range is already ours.
  if (!Remap(p, size, /*accessible=*/true)) {
    const int error = errno;
    std::lock_guard<std::mutex> lock(mu_);
    if (Reservation* r = FindReservation(p)) {
      RemoveRun(*r, static_cast<size_t>(p - r->base), size);
      used_[r->device] -= size;
    }
    return NPU_RT_FAIL(NRT_ERROR_OUT_OF_MEMORY, "nrtMapMem: cannot map ", FormatBytes(size),
                       " at ", ptr, ": ", std::strerror(error));
  }
  NPU_RT_LOG(kDebug, "mapped ", size, " bytes at ", ptr);
  return NRT_SUCCESS;
}

nrtError_t DeviceMemory::Unmap(void* ptr, size_t size) {
  char* p = static_cast<char*>(ptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Reservation* r = FindReservation(p);
    bool mapped = false;
    if (r != nullptr) {
      const size_t offset = static_cast<size_t>(p - r->base);
      auto run = r->mapped.upper_bound(offset);
      mapped = run != r->mapped.begin() &&
               std::prev(run)->first + std::prev(run)->second >= offset + size;
    }
    if (!mapped) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtUnmapMem: [", ptr, ", +", size,
                         ") is not a mapped part of a reservation from nrtReserveMemAddress");
    }
    RemoveRun(*r, static_cast<size_t>(p - r->base), size);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    used_[r->device] -= size;
  }
  // Returns the pages to the host; the range stays reserved (and inaccessible).
  Remap(p, size, /*accessible=*/false);
  NPU_RT_LOG(kDebug, "unmapped ", size, " bytes at ", ptr);
  return NRT_SUCCESS;
}

}  // namespace npu::runtime

using npu::runtime::Runtime;

namespace {

nrtError_t CheckPages(const char* api, const void* ptr, size_t size) {
  if (ptr == nullptr || size == 0) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, api, ": ", ptr == nullptr ? "ptr is NULL" : "size is 0");
  }
  if (!npu::runtime::PageAligned(reinterpret_cast<uintptr_t>(ptr)) ||
      !npu::runtime::PageAligned(size)) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, api, ": ptr ", ptr, " and size ", size,
                       " must be multiples of the granularity (", npu::runtime::PageSize(),
                       " bytes, nrtMemGetAllocationGranularity)");
  }
  return NRT_SUCCESS;
}

}  // namespace

extern "C" {

nrtError_t nrtMemGetAllocationGranularity(size_t* granularity) {
  return npu::runtime::WithRuntime([&](Runtime&) {
    if (granularity == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtMemGetAllocationGranularity: granularity is NULL");
    }
    *granularity = npu::runtime::PageSize();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtReserveMemAddress(void** ptr, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtReserveMemAddress: ptr is NULL");
    *ptr = nullptr;
    if (size == 0 || !npu::runtime::PageAligned(size)) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtReserveMemAddress: size ", size,
                         " must be a non-zero multiple of the granularity (",
                         npu::runtime::PageSize(), " bytes)");
    }
    return rt.memory().Reserve(rt.current_device(), size, ptr);
  });
}

nrtError_t nrtReleaseMemAddress(void* ptr) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ptr == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtReleaseMemAddress: ptr is NULL");
    return rt.memory().ReleaseReservation(ptr);
  });
}

nrtError_t nrtMapMem(void* ptr, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (nrtError_t error = CheckPages("nrtMapMem", ptr, size)) return error;
    if (rt.faults() != nullptr) {
      if (nrtError_t error = rt.faults()->OnAllocate(rt.current_device(), size)) return error;
    }
    return rt.memory().Map(ptr, size);
  });
}

nrtError_t nrtUnmapMem(void* ptr, size_t size) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (nrtError_t error = CheckPages("nrtUnmapMem", ptr, size)) return error;
    return rt.memory().Unmap(ptr, size);
  });
}

}  // extern "C"

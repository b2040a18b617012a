// HostCache.cpp - a block cache for large CPU allocations made on stream workers, and result placement.
//
// Why a cache: glibc hands large freed blocks back to the kernel, so each temporary of a host kernel
// (a convolution's result, oneDNN's scratch buffers) page-faulted all of its pages again on every
// launch: a 4 MiB result cost 2.5 ms of page faults, twice the convolution itself. Only stream
// workers use it; every other thread's CPU memory is PyTorch's allocator's as before.
#include "HostCache.h"

#include <ATen/ops/empty_like.h>
#include <c10/core/CPUAllocator.h>
#include <npu/runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "npu/opslib.h"

namespace npu::opslib::aten {
namespace {

// Smaller allocations stay with malloc, which keeps them in its heap anyway.
constexpr size_t kMinCached = size_t{128} << 10;
// Free blocks beyond this are returned to the system instead of cached.
constexpr size_t kMaxCachedFree = size_t{1} << 30;
// What PyTorch's CPU allocations are aligned to (and so what its kernels may assume).
constexpr uintptr_t kCpuAlignment = 64;

// Sizes are rounded up to classes an eighth of their power of two apart (at least 64 KiB), so
// that a recurring temporary finds its block again and no block wastes more than 12.5%.
size_t sizeClass(size_t n) {
  const size_t power = size_t{1} << (63 - __builtin_clzll(n));
  const size_t step = std::max<size_t>(size_t{64} << 10, power / 8);
  return (n + step - 1) / step * step;
}

// One output's placement while its kernel runs. A kernel may allocate several blocks of the
// output's size (oneDNN's convolution: a reordered input, its blocked result, the plain result,
// a contiguous copy); only the one it returns should be placed. Which one that is, `skip` says:
// the number of same-sized allocations to pass over, learned from the kernel's earlier calls
// with the same shapes (ATen allocates in the same order each time).
constexpr int kMaxSeen = 8;
struct Placement {
  void* where = nullptr;
  size_t bytes = 0;
  int skip = 0;     // same-sized allocations to pass over; -1: place none
  int seen = 0;     // same-sized allocations made so far
  bool taken = false;
  void* allocated[kMaxSeen] = {};  // the same-sized allocations, in order (for learning)
};
// The placements of the kernel running on this thread (one per output).
constexpr int kMaxPlacements = 4;
thread_local Placement t_placements[kMaxPlacements];
thread_local bool t_placing = false;
// The learned skips of this thread's kernels, by call site and shapes.
thread_local uint64_t t_site_key = 0;
thread_local std::unordered_map<uint64_t, std::array<int8_t, kMaxPlacements>> t_learned;
constexpr size_t kMaxLearned = 4096;  // distinct shapes remembered per thread

// The placement for an allocation of n bytes (nullptr: none); records the allocation's order.
void* takePlacement(size_t n) {
  void* where = nullptr;
  for (Placement& p : t_placements) {
    if (p.where == nullptr || p.bytes != n) continue;
    if (where == nullptr && !p.taken && p.seen == p.skip) {
      p.taken = true;
      where = p.where;
    }
  }
  return where;
}

void noteAllocation(size_t n, void* ptr) {
  for (Placement& p : t_placements) {
    if (p.where == nullptr || p.bytes != n) continue;
    if (p.seen < kMaxSeen) p.allocated[p.seen] = ptr;
    ++p.seen;
  }
}

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

uint64_t shapeKey(const char* site, Tensors outputs, Tensors inputs) {
  uint64_t h = mix(0xcbf29ce484222325ULL, reinterpret_cast<uintptr_t>(site));
  for (const auto* list : {&outputs, &inputs}) {
    for (const at::Tensor& t : *list) {
      if (!t.defined()) {
        h = mix(h, 0x55);
        continue;
      }
      h = mix(h, static_cast<uint64_t>(t.scalar_type()) << 8 | static_cast<uint64_t>(t.dim()));
      for (int64_t d = 0; d < t.dim(); ++d) h = mix(mix(h, t.size(d)), t.stride(d));
    }
  }
  return h;
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage()) return false;
  const char* a0 = static_cast<const char*>(a.storage().data());
  const char* b0 = static_cast<const char*>(b.storage().data());
  return a0 < b0 + b.storage().nbytes() && b0 < a0 + a.storage().nbytes();
}

class HostCacheAllocator final : public c10::Allocator {
 public:
  explicit HostCacheAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) override {
    if (t_placing) {
      if (void* p = takePlacement(n)) {
        noteAllocation(n, p);
        {
          std::lock_guard<std::mutex> lock(mu_);
          placed_.insert(p);
        }
        return {p, p, &releasePlaced, c10::Device(c10::DeviceType::CPU)};
      }
      c10::DataPtr block = allocateBlock(n);
      noteAllocation(n, block.get());
      return block;
    }
    return allocateBlock(n);
  }

  c10::DataPtr allocateBlock(size_t n) {
    if (n < kMinCached || nrtOnStreamWorker() == 0) return base_->allocate(n);
    void* p = take(sizeClass(n));
    if (p == nullptr) return base_->allocate(n);  // out of address space: the base decides
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &releaseAny; }

  void copy_data(void* dest, const void* src, size_t count) const override { base_->copy_data(dest, src, count); }

  void emptyCache() {
    std::multimap<size_t, void*> freed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      freed.swap(free_);
      cached_ = 0;
    }
    for (const auto& [size, p] : freed) munmap(p, size);
  }

  void stats(size_t* cached, size_t* in_use, size_t* hits, size_t* misses) {
    std::lock_guard<std::mutex> lock(mu_);
    *cached = cached_;
    *in_use = in_use_;
    *hits = hits_;
    *misses = misses_;
  }

  static HostCacheAllocator* instance;
  // Results stored with no copy (placed), and with a copy.
  static std::atomic<size_t> stored_in_place, stored_by_copy;

 private:
  void* take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first <= size + size / 4) {
        void* p = it->second;
        const size_t block = it->first;
        free_.erase(it);
        cached_ -= block;
        in_use_ += block;
        live_.emplace(p, block);
        ++hits_;
        return p;
      }
      ++misses_;
    }
    // Its own mapping, so that malloc can never hand its pages back to the kernel.
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ += size;
    live_.emplace(p, size);
    return p;
  }

  // Takes back a cached block; false if `p` is not one.
  bool give(void* p) {
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(p);
      if (it == live_.end()) return false;
      size = it->second;
      live_.erase(it);
      in_use_ -= size;
      if (cached_ + size <= kMaxCachedFree) {
        free_.emplace(size, p);
        cached_ += size;
        return true;
      }
    }
    munmap(p, size);
    return true;
  }

  // A placed result is device memory: it is only forgotten, never freed here.
  bool forgetPlaced(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return placed_.erase(p) > 0;
  }

  static void release(void* p) { instance->give(p); }
  static void releasePlaced(void* p) { instance->forgetPlaced(p); }
  // raw_deallocate of anything raw_allocate returned: cached, placed or the base allocator's.
  static void releaseAny(void* p) {
    if (p == nullptr || instance->give(p) || instance->forgetPlaced(p)) return;
    if (c10::DeleterFnPtr base = instance->base_->raw_deleter()) base(p);
  }

  c10::Allocator* base_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
  std::unordered_set<void*> placed_;  // placed results still alive
  size_t cached_ = 0;
  size_t in_use_ = 0;
  size_t hits_ = 0;
  size_t misses_ = 0;
};

HostCacheAllocator* HostCacheAllocator::instance = nullptr;
std::atomic<size_t> HostCacheAllocator::stored_in_place{0};
std::atomic<size_t> HostCacheAllocator::stored_by_copy{0};

// True when t's first element lies in region's memory.
bool startsInside(const at::Tensor& t, const at::Tensor& region) {
  if (t.numel() == 0 || region.numel() == 0) return false;
  const char* begin = static_cast<const char*>(region.data_ptr());
  const char* at = static_cast<const char*>(t.data_ptr());
  return at >= begin && at < begin + region.nbytes();
}

bool sameMemory(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

}  // namespace

ResultPlacement::ResultPlacement(const char* site, Tensors outputs, Tensors inputs) {
  // Only when the cache sits in front of the CPU allocator (otherwise nothing would see the
  // placements), for outputs that are one dense block at an address a CPU kernel may assume, and
  // that share no memory with the inputs: a temporary placed there would overwrite an input.
  if (HostCacheAllocator::instance == nullptr || c10::GetCPUAllocator() != HostCacheAllocator::instance) return;
  t_site_key = shapeKey(site, outputs, inputs);
  auto learned = t_learned.find(t_site_key);
  int slot = 0;
  for (const at::Tensor& out : outputs) {
    if (slot == kMaxPlacements) break;
    const int index = slot++;
    if (!out.defined() || !out.is_non_overlapping_and_dense() || out.nbytes() == 0) continue;
    if (reinterpret_cast<uintptr_t>(out.data_ptr()) % kCpuAlignment != 0) continue;
    if (std::any_of(inputs.begin(), inputs.end(), [&](const at::Tensor& in) { return overlaps(in, out); })) continue;
    Placement& p = t_placements[index];
    p = {};
    p.where = out.data_ptr();
    p.bytes = out.nbytes();
    p.skip = learned == t_learned.end() ? 0 : learned->second[index];
    t_placing = true;
  }
}

ResultPlacement::~ResultPlacement() {
  for (Placement& p : t_placements) p = {};
  t_placing = false;
}

namespace {
// After a result missed its placement: which of the kernel's same-sized allocations it was, so
// that the next call with these shapes places that one.
void learnPlacement(const at::Tensor& out, const at::Tensor& result) {
  for (int slot = 0; slot < kMaxPlacements; ++slot) {
    const Placement& p = t_placements[slot];
    if (p.where != out.data_ptr() || p.bytes != out.nbytes()) continue;
    int found = -1;  // not one of them (a view, another size): place none
    for (int i = std::min(p.seen, kMaxSeen) - 1; i >= 0; --i) {
      if (p.allocated[i] == result.data_ptr()) {
        found = i;
        break;
      }
    }
    if (t_learned.size() >= kMaxLearned && t_learned.count(t_site_key) == 0) t_learned.clear();
    auto [it, inserted] = t_learned.try_emplace(t_site_key);
    if (inserted) it->second.fill(0);
    it->second[slot] = static_cast<int8_t>(found);
    return;
  }
}
}  // namespace

void storeResult(const at::Tensor& out, const at::Tensor& result) {
  if (sameMemory(out, result)) {  // placed
    HostCacheAllocator::stored_in_place.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  HostCacheAllocator::stored_by_copy.fetch_add(1, std::memory_order_relaxed);
  if (t_placing) learnPlacement(out, result);
  if (startsInside(result, out)) {
    out.copy_(result.clone());  // placed, but in another layout: read it out before overwriting
    return;
  }
  out.copy_(result);
}

void storeResults(Tensors outputs, Tensors results) {
  std::vector<at::Tensor> outs(outputs), res(results);
  TORCH_CHECK(outs.size() == res.size(), "storeResults: ", outs.size(), " outputs, ", res.size(), " results");
  for (size_t j = 0; j < res.size(); ++j) {
    if (!outs[j].defined() || !res[j].defined()) continue;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (i != j && outs[i].defined() && startsInside(res[j], outs[i])) {
        res[j] = res[j].clone();
        break;
      }
    }
  }
  for (size_t j = 0; j < outs.size(); ++j) {
    if (outs[j].defined()) storeResult(outs[j], res[j]);
  }
}

}  // namespace npu::opslib::aten

extern "C" {

NOP_API void npu_opslib_aten_install_host_cache(void) {
  using npu::opslib::aten::HostCacheAllocator;
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked: CPU tensors may be freed during static destruction.
    HostCacheAllocator::instance = new HostCacheAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(HostCacheAllocator::instance, /*priority=*/1);
  });
}

NOP_API void npu_opslib_aten_empty_host_cache(void) {
  if (npu::opslib::aten::HostCacheAllocator::instance != nullptr) {
    npu::opslib::aten::HostCacheAllocator::instance->emptyCache();
  }
}

NOP_API void npu_opslib_aten_host_cache_stats(size_t* cached, size_t* in_use, size_t* hits, size_t* misses) {
  if (npu::opslib::aten::HostCacheAllocator::instance == nullptr) {
    *cached = *in_use = *hits = *misses = 0;
    return;
  }
  npu::opslib::aten::HostCacheAllocator::instance->stats(cached, in_use, hits, misses);
}

NOP_API void npu_opslib_aten_result_store_counts(size_t* in_place, size_t* by_copy) {
  using npu::opslib::aten::HostCacheAllocator;
  *in_place = HostCacheAllocator::stored_in_place.load(std::memory_order_relaxed);
  *by_copy = HostCacheAllocator::stored_by_copy.load(std::memory_order_relaxed);
}

}  // extern "C"

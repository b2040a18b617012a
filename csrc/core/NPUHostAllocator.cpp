// NPUHostAllocator.cpp - pinned host allocator: runtime host memory, freed once the streams that
// copied from / to it are done.
#include "csrc/core/NPUHostAllocator.h"

#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "csrc/core/NPUException.h"

namespace c10_npu {
namespace {

class NPUHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, cpu};
    void* ptr = nullptr;
    NPU_CHECK(nrtMallocHost(&ptr, n));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[ptr] = {};
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(n);
      sizes_[ptr] = n;
    }
    return {ptr, ptr, &freePinned, cpu};
  }

  at::DeleterFnPtr raw_deleter() const override { return &freePinned; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    record(ctx ? ctx : ptr, NPUStream(stream).handle());
    return true;
  }

  void record(const void* ptr, nrtStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(const_cast<void*>(ptr));
    if (it != live_.end()) it->second.insert(stream);
  }

  void release(void* ptr) {
    std::unordered_set<nrtStream_t> streams;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(ptr);
      if (it == live_.end()) return;
      streams = std::move(it->second);
      live_.erase(it);
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(sizes_[ptr]);
      sizes_.erase(ptr);
    }
    // Pinned buffers are not cached, so a pending async copy must finish before the memory goes.
    for (nrtStream_t s : streams) nrtStreamSynchronize(s);
    nrtFreeHost(ptr);
  }

  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}

  static void freePinned(void* ptr);

  // In a forked child: the parent's pinned buffers are unknown to the child's runtime; their
  // deleters then find nothing to free. The lock may have been held by a parent thread.
  void forgetAfterFork() noexcept {
    new (&mutex_) std::mutex();
    live_.clear();
    sizes_.clear();
    stats_ = at::HostStats();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::unordered_set<nrtStream_t>> live_;
  std::unordered_map<void*, size_t> sizes_;
  at::HostStats stats_;
};

NPUHostAllocator& hostAllocator() {
  static auto* instance = new NPUHostAllocator();  // leaked: see NPUCachingAllocator
  return *instance;
}

void NPUHostAllocator::freePinned(void* ptr) { hostAllocator().release(ptr); }

}  // namespace

void forgetPinnedMemoryAfterFork() noexcept { hostAllocator().forgetAfterFork(); }

at::HostAllocator* getPinnedHostAllocator() { return &hostAllocator(); }

bool isPinnedPtr(const void* ptr) { return ptr != nullptr && nrtIsPinnedHostPtr(ptr) == 1; }

void recordPinnedOnStream(const void* ptr, const NPUStream& stream) {
  hostAllocator().record(ptr, stream.handle());
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &hostAllocator())

}  // namespace c10_npu

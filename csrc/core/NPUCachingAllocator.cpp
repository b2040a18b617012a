// NPUCachingAllocator.cpp - per-device caching of runtime memory and the c10::DeviceAllocator facade.
#include "csrc/core/NPUCachingAllocator.h"

#include <c10/util/irange.h>

#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "csrc/core/NPUBlockPool.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;
using StatArray = c10::CachingAllocator::StatArray;

namespace {

std::string formatBytes(int64_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < 1048576) os << bytes / 1024.0 << " KiB";
  else if (bytes < 1073741824) os << bytes / 1048576.0 << " MiB";
  else os << bytes / 1073741824.0 << " GiB";
  return os.str();
}

class DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(int device) : device_(device) {}

  Block* malloc(size_t request, nrtStream_t stream) {
    std::unique_lock<std::mutex> lock(mutex_);
    processEvents();
    const size_t size = roundSize(request);
    BlockPool& pool = size <= kSmallSize ? small_ : large_;
    Block* block = findFreeBlock(pool, stream, size);
    if (block == nullptr) block = allocSegment(pool, stream, size);
    if (block == nullptr) {
      // Cached blocks may be waiting on other streams: wait for them (outside the lock, since a
      // stream task may itself be freeing memory), return the cache to the runtime and retry.
      stats_.num_alloc_retries++;
      lock.unlock();
      synchronizePendingEvents();
      synchronizeDevice();
      lock.lock();
      processEvents();
      releaseCachedBlocks();
      block = allocSegment(pool, stream, size);
    }
    if (block == nullptr) {
      stats_.num_ooms++;
      throwOutOfMemory(request);
    }
    block = splitAndActivate(block, pool, size, request);
    reportToProfiler(block, static_cast<int64_t>(block->size));
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> lock(mutex_);
    block->allocated = false;
    forEachStat(*block->pool, [&](StatType t) {
      stats_.allocation[static_cast<size_t>(t)].decrease(1);
      stats_.allocated_bytes[static_cast<size_t>(t)].decrease(block->size);
      stats_.requested_bytes[static_cast<size_t>(t)].decrease(block->requested);
    });
    reportToProfiler(block, -static_cast<int64_t>(block->size));
    if (!block->stream_uses.empty()) {
      // Another stream may still read the block: reuse it only once that stream passes this point.
      for (nrtStream_t s : block->stream_uses) {
        nrtEvent_t ev = nullptr;
        if (nrtEventCreate(&ev) == NRT_SUCCESS && nrtEventRecord(ev, s) == NRT_SUCCESS) {
          pending_.emplace_back(ev, block);
          block->pending_events++;
        } else if (ev) {
          nrtEventDestroy(ev);
        }
      }
      block->stream_uses.clear();
      if (block->pending_events > 0) return;
    }
    freeBlock(block);
  }

  void recordStream(Block* block, nrtStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream != block->stream) block->stream_uses.insert(stream);
  }

  void emptyCache() {
    synchronizePendingEvents();
    synchronizeDevice();
    std::lock_guard<std::mutex> lock(mutex_);
    processEvents();
    releaseCachedBlocks();
  }

  void setMemoryFraction(double fraction) {
    size_t free_bytes = 0, total = 0;
    NPU_CHECK(nrtMemGetInfo(&free_bytes, &total));
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = static_cast<size_t>(fraction * static_cast<double>(total));
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void resetPeak() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* a : statArrays()) for (auto& s : *a) s.reset_peak();
  }

  void resetAccumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (StatArray* a : statArrays()) for (auto& s : *a) s.reset_accumulated();
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  std::string summary() {
    DeviceStats s = stats();
    auto agg = [](const StatArray& a) { return a[static_cast<size_t>(StatType::AGGREGATE)]; };
    std::ostringstream os;
    os << "npu:" << device_ << " memory summary (current / peak):\n"
       << "  allocated: " << formatBytes(agg(s.allocated_bytes).current) << " / "
       << formatBytes(agg(s.allocated_bytes).peak) << "\n"
       << "  reserved:  " << formatBytes(agg(s.reserved_bytes).current) << " / "
       << formatBytes(agg(s.reserved_bytes).peak) << "\n"
       << "  active:    " << formatBytes(agg(s.active_bytes).current) << " / "
       << formatBytes(agg(s.active_bytes).peak) << "\n"
       << "  segments:  " << agg(s.segment).current << " / " << agg(s.segment).peak
       << ", allocations: " << agg(s.allocation).current << " / " << agg(s.allocation).peak << "\n";
    return os.str();
  }

 private:
  template <typename F>
  static void forEachStat(const BlockPool& pool, F f) {
    f(StatType::AGGREGATE);
    f(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  }

  std::vector<StatArray*> statArrays() {
    return {&stats_.allocation,     &stats_.segment,         &stats_.active,
            &stats_.inactive_split, &stats_.allocated_bytes, &stats_.reserved_bytes,
            &stats_.active_bytes,   &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  Block* findFreeBlock(BlockPool& pool, nrtStream_t stream, size_t size) {
    Block key(device_, stream, size, &pool, nullptr);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.blocks.erase(it);
    if (block->is_split()) {
      forEachStat(pool, [&](StatType t) {
        stats_.inactive_split[static_cast<size_t>(t)].decrease(1);
        stats_.inactive_split_bytes[static_cast<size_t>(t)].decrease(block->size);
      });
    }
    return block;
  }

  Block* allocSegment(BlockPool& pool, nrtStream_t stream, size_t size) {
    const size_t seg = segmentSize(size);
    const int64_t reserved = stats_.reserved_bytes[0].current;
    if (limit_ != 0 && static_cast<size_t>(reserved) + seg > limit_) return nullptr;
    void* ptr = nullptr;
    if (nrtMalloc(&ptr, seg) != NRT_SUCCESS) return nullptr;
    stats_.num_device_alloc++;
    forEachStat(pool, [&](StatType t) {
      stats_.segment[static_cast<size_t>(t)].increase(1);
      stats_.reserved_bytes[static_cast<size_t>(t)].increase(seg);
    });
    return new Block(device_, stream, seg, &pool, ptr);
  }

  Block* splitAndActivate(Block* block, BlockPool& pool, size_t size, size_t request) {
    const size_t remaining = block->size - size;
    const bool split = pool.is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
    if (split) {
      auto* rest = new Block(device_, block->stream, remaining, &pool,
                             static_cast<char*>(block->ptr) + size);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.blocks.insert(rest);
      forEachStat(pool, [&](StatType t) {
        stats_.inactive_split[static_cast<size_t>(t)].increase(1);
        stats_.inactive_split_bytes[static_cast<size_t>(t)].increase(remaining);
      });
    }
    block->allocated = true;
    block->requested = request;
    forEachStat(pool, [&](StatType t) {
      auto i = static_cast<size_t>(t);
      stats_.allocation[i].increase(1);
      stats_.allocated_bytes[i].increase(block->size);
      stats_.active[i].increase(1);
      stats_.active_bytes[i].increase(block->size);
      stats_.requested_bytes[i].increase(request);
    });
    return block;
  }

  // Returns a no-longer-used block to its pool, merging it with free neighbours.
  // Allocation events for torch.profiler's profile_memory (memory views, NPU Mem columns).
  void reportToProfiler(const Block* block, int64_t delta) {
    c10::reportMemoryUsageToProfiler(block->ptr, delta, stats_.allocated_bytes[0].current,
                                     stats_.reserved_bytes[0].current,
                                     c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_)));
  }

  void freeBlock(Block* block) {
    BlockPool& pool = *block->pool;
    const size_t original = block->size;
    for (Block* neighbour : {block->prev, block->next}) {
      if (!neighbour || neighbour->allocated || neighbour->pending_events > 0) continue;
      pool.blocks.erase(neighbour);
      forEachStat(pool, [&](StatType t) {
        stats_.inactive_split[static_cast<size_t>(t)].decrease(1);
        stats_.inactive_split_bytes[static_cast<size_t>(t)].decrease(neighbour->size);
      });
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = neighbour->next;
        if (block->next) block->next->prev = block;
      }
      block->size += neighbour->size;
      delete neighbour;
    }
    pool.blocks.insert(block);
    forEachStat(pool, [&](StatType t) {
      auto i = static_cast<size_t>(t);
      stats_.active[i].decrease(1);
      stats_.active_bytes[i].decrease(original);
      if (block->is_split()) {
        stats_.inactive_split[i].increase(1);
        stats_.inactive_split_bytes[i].increase(block->size);
      }
    });
  }

  void processEvents() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (nrtEventQuery(it->first) == NRT_ERROR_NOT_READY) {
        ++it;
        continue;
      }
      nrtEventDestroy(it->first);
      Block* block = it->second;
      it = pending_.erase(it);
      if (--block->pending_events == 0) freeBlock(block);
    }
  }

  void synchronizePendingEvents() {
    std::vector<nrtEvent_t> events;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& p : pending_) events.push_back(p.first);
    }
    // Events stay alive: only processEvents (under the lock, after this) destroys them.
    for (nrtEvent_t ev : events) nrtEventSynchronize(ev);
  }

  // Queued work may still touch freed blocks (tasks hold raw pointers, as kernels do on CUDA), so
  // memory goes back to the runtime only once the device is idle. Called without the lock: tasks
  // may free memory. A failed task's error surfaces here, as at any synchronising call.
  void synchronizeDevice() {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    NPU_CHECK(nrtDeviceSynchronize());
  }

  // Frees every whole, unused segment back to the runtime (after synchronizeDevice()).
  void releaseCachedBlocks() {
    for (BlockPool* pool : {&small_, &large_}) {
      for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
        Block* block = *it;
        if (block->is_split()) {
          ++it;
          continue;
        }
        it = pool->blocks.erase(it);
        nrtFree(block->ptr);
        stats_.num_device_free++;
        forEachStat(*pool, [&](StatType t) {
          stats_.segment[static_cast<size_t>(t)].decrease(1);
          stats_.reserved_bytes[static_cast<size_t>(t)].decrease(block->size);
        });
        delete block;
      }
    }
  }

  [[noreturn]] void throwOutOfMemory(size_t request) {
    size_t free_bytes = 0, total = 0;
    nrtMemGetInfo(&free_bytes, &total);
    const auto allocated = stats_.allocated_bytes[0].current;
    const auto reserved = stats_.reserved_bytes[0].current;
    std::ostringstream os;
    os << "NPU out of memory. Tried to allocate " << formatBytes(request) << " (npu:" << device_
       << "; " << formatBytes(total) << " total capacity; " << formatBytes(free_bytes)
       << " free; " << formatBytes(allocated) << " allocated by PyTorch; " << formatBytes(reserved)
       << " reserved in total by PyTorch";
    if (limit_ != 0) os << "; per-process limit " << formatBytes(limit_);
    os << "). Free tensors you no longer need, reduce the batch size, or raise the software NPU's "
          "capacity with NPU_SIM_MEMORY.\n";
    mutex_.unlock();  // summary() takes the lock again
    std::string text = os.str() + summary();
    mutex_.lock();
    TORCH_CHECK_WITH(OutOfMemoryError, false, text);
  }

  const int device_;
  std::mutex mutex_;
  DeviceStats stats_;
  BlockPool small_{true};
  BlockPool large_{false};
  std::deque<std::pair<nrtEvent_t, Block*>> pending_;
  size_t limit_ = 0;  // 0: the device's capacity is the only limit
};

void deleteBlock(void* ctx);

class NPUAllocator final : public c10::DeviceAllocator {
 public:
  DeviceCachingAllocator& device(c10::DeviceIndex index) {
    std::call_once(init_, [this] {
      for (int i = 0; i < device_count(); ++i) {
        devices_.push_back(std::make_unique<DeviceCachingAllocator>(i));
      }
    });
    check_device_index(index);
    return *devices_[index];
  }

  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex dev = current_device();
    const c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, device};
    Block* block = this->device(dev).malloc(n, getCurrentNPUStream(dev).handle());
    return {block->ptr, block, &deleteBlock, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &deleteBlock; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // In stream order: the source may still be being written by queued work.
    NPUStream stream = getCurrentNPUStream();
    NPU_CHECK(nrtMemcpyAsync(dest, src, count, NRT_MEMCPY_DEVICE_TO_DEVICE, stream.handle()));
    stream.synchronize();
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t) override {
    for (int i = 0; i < device_count(); ++i) device(i).emptyCache();
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (!ptr.get_context() || ptr.get_deleter() != &deleteBlock) return;
    auto* block = static_cast<Block*>(ptr.get_context());
    device(block->device).recordStream(block, NPUStream(stream).handle());
  }

  DeviceStats getDeviceStats(c10::DeviceIndex d) override { return device(d).stats(); }
  void resetAccumulatedStats(c10::DeviceIndex d) override { device(d).resetAccumulated(); }
  void resetPeakStats(c10::DeviceIndex d) override { device(d).resetPeak(); }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, d));
    size_t free_bytes = 0, total = 0;
    NPU_CHECK(nrtMemGetInfo(&free_bytes, &total));
    return {free_bytes, total};
  }

 private:
  std::once_flag init_;
  std::vector<std::unique_ptr<DeviceCachingAllocator>> devices_;
};

// Leaked on purpose: tensors freed by other libraries' static destructors still find it.
NPUAllocator& allocator() {
  static auto* instance = new NPUAllocator();
  return *instance;
}

void deleteBlock(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  allocator().device(block->device).free(block);
}

struct Registration {
  Registration() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator()); }
} registration;

}  // namespace

c10::DeviceAllocator* get() { return &allocator(); }

void recordStream(const c10::DataPtr& ptr, NPUStream stream) {
  allocator().recordStream(ptr, stream.unwrap());
}

void emptyCache() { allocator().emptyCache({0, 0}); }

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK(fraction > 0 && fraction <= 1, "memory fraction must be in (0, 1], got ", fraction);
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  allocator().device(device).setMemoryFraction(fraction);
}

DeviceStats getDeviceStats(c10::DeviceIndex device) { return allocator().getDeviceStats(device); }
void resetPeakStats(c10::DeviceIndex device) { allocator().resetPeakStats(device); }
void resetAccumulatedStats(c10::DeviceIndex device) { allocator().resetAccumulatedStats(device); }
std::string memorySummary(c10::DeviceIndex device) { return allocator().device(device).summary(); }

}  // namespace c10_npu::NPUCachingAllocator

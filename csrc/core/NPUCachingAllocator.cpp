// NPUCachingAllocator.cpp - per-device caching of runtime memory and the c10::DeviceAllocator facade.
#include "csrc/core/NPUCachingAllocator.h"

#include "opslib/aten/HostCache.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "csrc/core/NPUDeviceCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUTrace.h"

namespace c10_npu::NPUCachingAllocator {

namespace {

void deleteBlock(void* ctx);

class NPUAllocator final : public c10::DeviceAllocator {
 public:
  DeviceCachingAllocator& device(c10::DeviceIndex index) {
    // Checked before the once_flag: every allocation passes here, and call_once is not free.
    if (C10_UNLIKELY(!ready_.load(std::memory_order_acquire))) {
      std::call_once(init_, [this] {
        for (int i = 0; i < device_count(); ++i) {
          devices_.push_back(std::make_unique<DeviceCachingAllocator>(i));
        }
        ready_.store(true, std::memory_order_release);
      });
    }
    check_device_index(index);
    return *devices_[index];
  }

  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex dev = current_device();
    const c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, device};
    Block* block = this->device(dev).malloc(n, currentStreamHandle(dev));
    trace::memoryAllocated(block->ptr);
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
    npu_opslib_aten_empty_host_cache();  // host kernels' cached temporaries too
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (!ptr.get_context() || ptr.get_deleter() != &deleteBlock) return;
    auto* block = static_cast<Block*>(ptr.get_context());
    device(block->device).recordStream(block, NPUStream(stream).handle());
  }

  void eraseStream(const c10::DataPtr& ptr, c10::Stream stream) {
    if (!ptr.get_context() || ptr.get_deleter() != &deleteBlock) return;
    auto* block = static_cast<Block*>(ptr.get_context());
    device(block->device).eraseStream(block, NPUStream(stream).handle());
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

  // Every initialised device's allocator (none before the first allocation).
  template <typename F>
  void forEachStarted(F f) {
    if (!ready_.load(std::memory_order_acquire)) return;
    for (auto& device : devices_) f(*device);
  }

  // In a forked child: the parent's device memory belongs to a runtime the child abandoned. The
  // per-device allocators (and whatever locks parent threads held in them) are leaked; blocks of
  // the parent's tensors are then foreign to the new ones, whose free() ignores them.
  void forgetAfterFork() noexcept {
    for (auto& device : devices_) (void)device.release();
    devices_.clear();
    ready_.store(false, std::memory_order_relaxed);
    new (&init_) std::once_flag();
  }

 private:
  std::once_flag init_;
  std::atomic<bool> ready_{false};
  std::vector<std::unique_ptr<DeviceCachingAllocator>> devices_;
};

// Leaked on purpose: tensors freed by other libraries' static destructors still find it.
NPUAllocator& allocator() {
  static auto* instance = new NPUAllocator();
  return *instance;
}

void deleteBlock(void* ctx) {
  auto* block = static_cast<Block*>(ctx);
  trace::memoryFreed(block->ptr);
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

void eraseStream(const c10::DataPtr& ptr, NPUStream stream) { allocator().eraseStream(ptr, stream.unwrap()); }

void emptyCache() { allocator().emptyCache({0, 0}); }

void emptyVirtAddrCache() {
  for (int i = 0; i < device_count(); ++i) allocator().device(i).emptyVirtAddrCache();
}

void forgetCachedMemoryAfterFork() noexcept { allocator().forgetAfterFork(); }

void setMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(fraction >= 0 && fraction <= 1, "Invalid fraction value: ", fraction, ". Allowed range: 0~1");
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device));
  allocator().device(device).setMemoryFraction(fraction);
}

DeviceStats getDeviceStats(c10::DeviceIndex device) { return allocator().getDeviceStats(device); }
int64_t oomRejections(c10::DeviceIndex device) { return allocator().device(device).oomRejections(); }
void resetPeakStats(c10::DeviceIndex device) { allocator().resetPeakStats(device); }
void resetAccumulatedStats(c10::DeviceIndex device) { allocator().resetAccumulatedStats(device); }
std::string memorySummary(c10::DeviceIndex device) { return allocator().device(device).summary(); }

void retainPool(c10::DeviceIndex device, c10::MempoolId_t id) { allocator().device(device).retainPool(id); }

void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id, std::function<bool(nrtStream_t)> filter) {
  allocator().device(device).beginAllocateToPool(id, std::move(filter));
}

void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t id) {
  allocator().device(device).endAllocateToPool(id);
}

void releasePool(c10::DeviceIndex device, c10::MempoolId_t id, bool release_now) {
  allocator().device(device).releasePool(id, release_now);
}

int poolUseCount(c10::DeviceIndex device, c10::MempoolId_t id) { return allocator().device(device).poolUseCount(id); }

bool hasDeadPools(c10::DeviceIndex device) { return allocator().device(device).hasDeadPools(); }

void releaseDeadPools(c10::DeviceIndex device) { allocator().device(device).releaseDeadPools(); }

void endTrainingStep() {
  allocator().forEachStarted([](DeviceCachingAllocator& device) { device.endStep(); });
}

StepPlanStats stepPlanStats(c10::DeviceIndex device) {
  return allocator().device(device).stepPlanStats();
}

void recordHistory(bool enabled, CreateContextFn context_fn, size_t max_entries,
                   RecordContext when, bool clear) {
  for (int i = 0; i < device_count(); ++i) {
    allocator().device(static_cast<c10::DeviceIndex>(i)).recordHistory(enabled, context_fn,
                                                                       max_entries, when, clear);
  }
}

SnapshotInfo snapshot() {
  SnapshotInfo result;
  for (int i = 0; i < device_count(); ++i) {
    auto& device = allocator().device(static_cast<c10::DeviceIndex>(i));
    for (auto& segment : device.segments()) result.segments.push_back(std::move(segment));
    result.device_traces.push_back(device.trace());
  }
  return result;
}

}  // namespace c10_npu::NPUCachingAllocator

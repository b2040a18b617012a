// NPUHostAllocator.cpp - pinned host allocator: PyTorch's caching host allocator over the runtime's
// pinned memory, with npu streams and events.
//
// Why cached: pinning a DataLoader batch (pin_memory=True) allocated and mapped fresh pinned memory
// every step, and freeing the previous batch waited for the streams that had copied from it, a
// synchronisation in the middle of every training step. Blocks now return to a cache; a block used
// by asynchronous copies is reused once events recorded on those streams at its free have passed.
#include "csrc/core/NPUHostAllocator.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstring>
#include <utility>

#include "csrc/core/NPUException.h"

namespace c10_npu {
namespace {

// An npu event owned by a freed pinned block until the copies it waits for are done.
class PinnedBlockEvent {
 public:
  PinnedBlockEvent() = default;
  explicit PinnedBlockEvent(nrtEvent_t event) : event_(event) {}
  PinnedBlockEvent(PinnedBlockEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  PinnedBlockEvent& operator=(PinnedBlockEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  PinnedBlockEvent(const PinnedBlockEvent&) = delete;
  PinnedBlockEvent& operator=(const PinnedBlockEvent&) = delete;
  ~PinnedBlockEvent() {
    if (event_ != nullptr) nrtEventDestroy(event_);
  }

  bool done() const { return event_ == nullptr || nrtEventQuery(event_) == NRT_SUCCESS; }

 private:
  nrtEvent_t event_ = nullptr;
};

using PinnedBlock = at::HostBlock<NPUStream>;

struct NPUCachingHostAllocatorImpl final : public at::CachingHostAllocatorImpl<NPUStream, PinnedBlockEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override { NPU_CHECK(nrtMallocHost(ptr, size)); }

  void free_block(PinnedBlock* block) override { nrtFreeHost(block->ptr_); }

  void record_stream(std::optional<std::vector<PinnedBlockEvent>>& events, NPUStream stream) override {
    nrtEvent_t event = nullptr;
    NPU_CHECK(nrtEventCreate(&event));
    PinnedBlockEvent owned(event);
    NPU_CHECK(nrtEventRecord(event, stream.handle()));
    events->push_back(std::move(owned));
  }

  bool query_event(PinnedBlockEvent& event) override { return event.done(); }

  NPUStream get_current_stream() const override { return getCurrentNPUStream(); }

  bool stream_is_capturing(NPUStream) const override { return false; }

 public:
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

void deletePinned(void* ctx);

struct NPUCachingHostAllocator final
    : public at::CachingHostAllocatorInterface<NPUCachingHostAllocatorImpl, deletePinned> {
  // In a forked child the parent's pinned blocks belong to a runtime the child does not have: a new,
  // empty cache; the old one is leaked (its memory is the parent's copy-on-write image).
  void forgetAfterFork() noexcept {
    (void)impl_.release();
    impl_ = std::make_unique<NPUCachingHostAllocatorImpl>();
  }
};

NPUCachingHostAllocator& hostAllocator() {
  static auto* instance = new NPUCachingHostAllocator();  // leaked: see NPUCachingAllocator
  return *instance;
}

void deletePinned(void* ctx) { hostAllocator().free(ctx); }

}  // namespace

void forgetPinnedMemoryAfterFork() noexcept { hostAllocator().forgetAfterFork(); }

at::HostAllocator* getPinnedHostAllocator() { return &hostAllocator(); }

bool isPinnedPtr(const void* ptr) { return ptr != nullptr && nrtIsPinnedHostPtr(ptr) == 1; }

void recordPinnedOnStream(const c10::Storage& storage, const NPUStream& stream) {
  hostAllocator().record_event(storage.mutable_data(), storage.data_ptr().get_context(), stream.unwrap());
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &hostAllocator())

}  // namespace c10_npu

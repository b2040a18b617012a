// NPUDeviceCachingAllocator.h - one device's caching allocator: pools, block splitting and merging,
// per-stream reuse, record_stream, statistics, memory fraction, PYTORCH_NPU_ALLOC_CONF (max split
// size, garbage collection, power-of-two rounding, expandable segments) and memory history.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "csrc/core/NPUBlockPool.h"
#include "csrc/core/NPUStepPlanner.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingDeviceAllocator::CreateContextFn;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::SegmentInfo;
using c10::CachingDeviceAllocator::TraceEntry;

// Memory obtained from the runtime: one nrtMalloc block, or an expandable segment (a reserved
// address range whose pages are mapped as it grows).
struct Segment {
  char* base;
  size_t size;  // bytes allocated, or the reserved range of an expandable segment
  nrtStream_t stream;
  BlockPool* pool;
  bool expandable;
  Block* head;          // the block at `base`
  size_t mapped = 0;    // expandable: bytes mapped now
  std::shared_ptr<c10::GatheredContext> context;  // where it was allocated (memory history)
};

// Merges `neighbour` (block's prev or next in the same segment, free in the same way) into
// `block`; the caller has taken it out of its pool's set and deletes it.
inline void absorbNeighbour(Block* block, Block* neighbour) {
  if (neighbour == block->prev) {
    block->ptr = neighbour->ptr;
    block->prev = neighbour->prev;
    if (block->prev) block->prev->next = block;
    if (block->segment->head == neighbour) block->segment->head = block;
  } else {
    block->next = neighbour->next;
    if (block->next) block->next->prev = block;
  }
  block->size += neighbour->size;
}

class DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(int device);

  Block* malloc(size_t request, nrtStream_t stream);
  void free(Block* block);
  bool owns(const Block* block) const {
    return block->pool == &small_ || block->pool == &large_ || block->pool == &expandable_;
  }
  void recordStream(Block* block, nrtStream_t stream);

  // Private pools (NPUPrivatePools.cpp): graph captures' and torch.npu.MemPool's memory. While a
  // pool is routed (beginAllocateToPool), allocations whose stream passes `filter` come from the
  // pool's own segments, whose blocks carry the pool's token where a stream would be: nothing else
  // reuses them, and emptying the cache leaves them mapped while the pool has users. The pool is
  // created (or gains a user) with its first route or retainPool; releasePool drops a user. A pool
  // without users gives its free memory back: at once with `release_now` (the caller synchronised the
  // device, so no queued replay can touch it), else at the next emptying of the cache.
  void retainPool(c10::MempoolId_t id);
  void beginAllocateToPool(c10::MempoolId_t id, std::function<bool(nrtStream_t)> filter);
  void endAllocateToPool(c10::MempoolId_t id);
  void releasePool(c10::MempoolId_t id, bool release_now = false);
  int poolUseCount(c10::MempoolId_t id);
  // Pools without users that still hold memory (a graph's outputs freed after its reset) give back
  // their free memory; the caller synchronised the device. True if there were any.
  bool hasDeadPools();
  void releaseDeadPools();
  // Forgets an earlier recordStream: the block is reused after its free without waiting for `stream`.
  void eraseStream(Block* block, nrtStream_t stream);
  void emptyCache();
  // Unmaps the free pages of expandable segments only; other cached segments stay.
  void emptyVirtAddrCache();
  void setMemoryFraction(double fraction);
  DeviceStats stats();
  int64_t oomRejections();  // memory_stats()' num_oom_rejections
  void resetPeak();
  void resetAccumulated();
  std::string summary();
  // The end of a training step (after each optimizer step): with expandable segments, the step
  // planner plans the next steps' addresses from this one.
  void endStep();
  StepPlanStats stepPlanStats();

  // Memory history (torch.npu.memory._record_memory_history / _snapshot).
  void recordHistory(bool enabled, CreateContextFn context_fn, size_t max_entries,
                     RecordContext when, bool clear);
  std::vector<SegmentInfo> segments();
  std::vector<TraceEntry> trace();

 private:
  // Pools and blocks (NPUDeviceCachingAllocator.cpp).
  Block* findFreeBlock(const AllocatorSettings& settings, BlockPool& pool, nrtStream_t stream,
                       size_t size);
  Block* allocSegment(const AllocatorSettings& settings, BlockPool& pool, nrtStream_t stream,
                      size_t size, const std::shared_ptr<c10::GatheredContext>& context);
  Block* splitAndActivate(Block* block, BlockPool& pool, size_t size, size_t request);
  void reportToProfiler(const Block* block, int64_t delta);
  void freeBlock(Block* block);
  void insertFree(Block* block);
  void addFree(BlockPool& pool, Block* block);
  void removeFree(BlockPool& pool, BlockSet::const_iterator it);
  void removeFree(BlockPool& pool, Block* block);
  void countInactiveSplit(const Block* block, bool listed);
  void processEvents();
  void synchronizePendingEvents();
  void synchronizeDevice();
  void releaseCachedBlocks();
  void releaseSegment(Segment* segment);
  void collectGarbage(const AllocatorSettings& settings);
  size_t allowedMemory();
  // Whether `bytes` more may be reserved under set_per_process_memory_fraction and the settings'
  // per_process_memory_fraction; counts a throw_on_npumalloc_oom rejection when not.
  bool fitsLimits(const AllocatorSettings& settings, size_t bytes);
  [[noreturn]] void throwOutOfMemory(size_t request, std::unique_lock<std::mutex>& lock);

  // Private pools (NPUPrivatePools.cpp), under the lock.
  nrtStream_t routeToPool(nrtStream_t stream);
  bool inLivePool(const Block* block) const;
  void releasePoolMemory(nrtStream_t token);
  struct PrivatePool {
    nrtStream_t token;  // what the pool's blocks carry as their stream
    int use_count = 0;
  };
  PrivatePool& poolFor(c10::MempoolId_t id);
  void forgetIfEmpty(std::map<c10::MempoolId_t, PrivatePool>::iterator pool);

  // Expandable segments (NPUExpandableSegments.cpp).
  Block* growExpandable(BlockPool& pool, nrtStream_t stream, size_t size,
                        const std::shared_ptr<c10::GatheredContext>& context);
  Segment* expandableSegmentFor(BlockPool& pool, nrtStream_t stream,
                                const std::shared_ptr<c10::GatheredContext>& context);
  void unmapFreePages(Block* block);
  Block* splitOff(Block* block, size_t offset);
  void insertUnmapped(Block* block);
  Block* takeFreeRange(BlockPool& pool, nrtStream_t stream, char* ptr, size_t size);

  // History (NPUMemoryHistory.cpp).
  std::shared_ptr<c10::GatheredContext> maybeGatherContext(RecordContext level);
  void recordTrace(TraceEntry::Action action, size_t addr, size_t size, nrtStream_t stream,
                   std::shared_ptr<c10::GatheredContext> context);

  // Statistics go to the aggregate and to one pool: a segment's (reserve, segments) to its pool,
  // a block's (allocations, active, inactive splits) to its size class.
  template <typename F>
  static void forEachStat(bool small, F f) {
    f(c10::CachingAllocator::StatType::AGGREGATE);
    f(small ? c10::CachingAllocator::StatType::SMALL_POOL
            : c10::CachingAllocator::StatType::LARGE_POOL);
  }
  template <typename F>
  static void forEachStat(const BlockPool& pool, F f) { forEachStat(pool.is_small, f); }
  template <typename F>
  static void forEachStat(const Block* block, F f) { forEachStat(countsAsSmall(block), f); }
  std::vector<c10::CachingAllocator::StatArray*> statArrays();

  const int device_;
  std::mutex mutex_;
  DeviceStats stats_;
  BlockPool small_{true};
  BlockPool large_{false};
  // expandable_segments:True: blocks of every size share one reserved range per stream, so the
  // small and the large blocks' peaks (which come at different points of a training step) share
  // pages. Its reserve and segments count in the large pool; its blocks by their size class.
  BlockPool expandable_{false, /*shared=*/true};
  BlockRecycler recycler_;
  StepPlanner planner_;  // addresses of recurring steps' requests in the expandable range
  std::list<std::unique_ptr<Segment>> segments_;
  std::deque<std::pair<nrtEvent_t, Block*>> pending_;
  std::map<c10::MempoolId_t, PrivatePool> private_pools_;
  std::map<nrtStream_t, c10::MempoolId_t> pool_of_token_;
  std::vector<std::pair<c10::MempoolId_t, std::function<bool(nrtStream_t)>>> pool_routes_;
  bool limited_ = false;  // set_per_process_memory_fraction was called: reserved memory stays <= limit_
  size_t limit_ = 0;
  int64_t oom_rejections_ = 0;  // requests refused by throw_on_npumalloc_oom
  // Why the runtime refused the last allocation (an injected fault, or capacity), for the OOM message.
  std::string runtime_refusal_;
  size_t page_size_ = 0;

  // Memory history: read without the lock on the allocation path, so flags are atomic.
  std::atomic<bool> record_history_{false};
  std::atomic<RecordContext> record_context_{RecordContext::NEVER};
  CreateContextFn context_fn_ = nullptr;
  size_t max_entries_ = 0;
  std::vector<TraceEntry> trace_;  // a ring once it holds max_entries_
  size_t trace_next_ = 0;          // where the next entry goes once the ring is full
};

}  // namespace c10_npu::NPUCachingAllocator

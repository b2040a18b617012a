// NPUDeviceCachingAllocator.cpp - one device's pools: finding, splitting, merging and releasing
// blocks, statistics, memory fraction, garbage collection and out-of-memory reporting.
#include "csrc/core/NPUDeviceCachingAllocator.h"

#include <c10/core/DeviceGuard.h>

#include <sstream>

#include "csrc/core/NPUException.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using StatArray = c10::CachingAllocator::StatArray;

namespace {

size_t idx(StatType t) { return static_cast<size_t>(t); }

}  // namespace

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

DeviceCachingAllocator::DeviceCachingAllocator(int device) : device_(device) {
  if (nrtMemGetAllocationGranularity(&page_size_) != NRT_SUCCESS) page_size_ = 4096;
}

Block* DeviceCachingAllocator::malloc(size_t request, nrtStream_t stream) {
  const AllocatorSettings& settings = allocatorSettings();
  // Gathered before the lock: a Python stack needs the GIL, whose holder may be waiting for us.
  std::shared_ptr<c10::GatheredContext> context = maybeGatherContext(RecordContext::STATE);
  // As CUDA's allocator: a request this large is a bug in the caller (a negative size cast to size_t, ...).
  TORCH_CHECK_WITH(OutOfMemoryError, request < (size_t{1} << 60), "Tried to allocate more than 1EB memory (",
                   request, " bytes) on npu:", static_cast<int>(device_), ".");
  std::unique_lock<std::mutex> lock(mutex_);
  if (!pending_.empty()) processEvents();
  // A routed private pool (a capture, a MemPool) serves this stream: from here on its token stands
  // for the stream, so only the pool's blocks are found and new segments belong to it.
  if (!pool_routes_.empty()) stream = routeToPool(stream);
  const size_t size = roundSize(settings, request);
  BlockPool& pool = settings.expandable_segments ? expandable_ : size <= kSmallSize ? small_ : large_;
  const bool collect = settings.garbage_collection_threshold > 0 && !settings.expandable_segments;
  if (collect) {
    for (Block* b : pool.blocks) ++b->gc_count;
  }
  // A recurring step's request first tries the address its step plan gave it.
  char* planned = settings.expandable_segments ? planner_.propose(size, stream) : nullptr;
  Block* block = planned ? takeFreeRange(pool, stream, planned, size) : nullptr;
  if (block == nullptr) block = findFreeBlock(settings, pool, stream, size);
  if (block == nullptr) {
    if (collect) collectGarbage(settings);
    block = settings.expandable_segments ? growExpandable(pool, stream, size, context)
                                         : allocSegment(settings, pool, stream, size, context);
  }
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
    block = settings.expandable_segments ? growExpandable(pool, stream, size, context)
                                         : allocSegment(settings, pool, stream, size, context);
  }
  if (block == nullptr) {
    stats_.num_ooms++;
    throwOutOfMemory(request, lock);
  }
  block = splitAndActivate(block, pool, size, request);
  if (settings.expandable_segments) {
    block->plan_step = planner_.step();
    block->plan_index = planner_.onAlloc(size, stream, planned != nullptr, block->ptr == planned);
  }
  block->context = std::move(context);
  reportToProfiler(block, static_cast<int64_t>(block->size));
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::ALLOC, reinterpret_cast<size_t>(block->ptr), request, stream,
                record_context_.load() >= RecordContext::ALLOC ? block->context : nullptr);
  }
  return block;
}

void DeviceCachingAllocator::free(Block* block) {
  if (!owns(block)) return;  // a parent's block in a forked child: its runtime is gone
  std::shared_ptr<c10::GatheredContext> context = maybeGatherContext(RecordContext::ALL);
  std::lock_guard<std::mutex> lock(mutex_);
  block->allocated = false;
  block->context.reset();
  const AllocatorSettings& settings = allocatorSettings();
  forEachStat(block, [&](StatType t) {
    stats_.allocation[idx(t)].decrease(1);
    stats_.allocated_bytes[idx(t)].decrease(block->size);
    stats_.requested_bytes[idx(t)].decrease(block->requested);
  });
  reportToProfiler(block, -static_cast<int64_t>(block->size));
  if (!block->pool->is_small && block->size >= settings.max_split_size) {
    stats_.oversize_allocations.decrease(1);
  }
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::FREE_REQUESTED, reinterpret_cast<size_t>(block->ptr), block->requested,
                block->stream, std::move(context));
  }
  if (!block->stream_uses.empty() && pool_of_token_.count(block->stream) != 0) {
    // A private pool's blocks are reused only by the pool's own (captured, stream-ordered) work.
    block->stream_uses.clear();
  }
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

void DeviceCachingAllocator::recordStream(Block* block, nrtStream_t stream) {
  if (!owns(block)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream != block->stream) block->stream_uses.insert(stream);
}

void DeviceCachingAllocator::eraseStream(Block* block, nrtStream_t stream) {
  if (!owns(block)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  block->stream_uses.erase(stream);
}

void DeviceCachingAllocator::emptyVirtAddrCache() {
  synchronizePendingEvents();
  synchronizeDevice();
  std::lock_guard<std::mutex> lock(mutex_);
  processEvents();
  std::vector<Block*> free_blocks(expandable_.blocks.begin(), expandable_.blocks.end());
  for (Block* block : free_blocks) {
    if (!inLivePool(block)) unmapFreePages(block);
  }
  planner_.reset();  // its addresses may be unmapped now
}

void DeviceCachingAllocator::emptyCache() {
  synchronizePendingEvents();
  synchronizeDevice();
  std::lock_guard<std::mutex> lock(mutex_);
  processEvents();
  releaseCachedBlocks();
  planner_.reset();  // its addresses may be unmapped now
}

void DeviceCachingAllocator::setMemoryFraction(double fraction) {
  size_t free_bytes = 0, total = 0;
  NPU_CHECK(nrtMemGetInfo(&free_bytes, &total));
  std::lock_guard<std::mutex> lock(mutex_);
  limited_ = true;
  limit_ = static_cast<size_t>(fraction * static_cast<double>(total));
}

int64_t DeviceCachingAllocator::oomRejections() {
  std::lock_guard<std::mutex> lock(mutex_);
  return oom_rejections_;
}

DeviceStats DeviceCachingAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceStats s = stats_;
  const size_t max_split = allocatorSettings().max_split_size;
  s.max_split_size = max_split == static_cast<size_t>(-1) ? 0 : static_cast<int64_t>(max_split);
  return s;
}

void DeviceCachingAllocator::resetPeak() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* a : statArrays()) for (auto& s : *a) s.reset_peak();
  stats_.oversize_allocations.reset_peak();
  stats_.oversize_segments.reset_peak();
}

void DeviceCachingAllocator::resetAccumulated() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (StatArray* a : statArrays()) for (auto& s : *a) s.reset_accumulated();
  stats_.oversize_allocations.reset_accumulated();
  stats_.oversize_segments.reset_accumulated();
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  oom_rejections_ = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

std::string DeviceCachingAllocator::summary() {
  DeviceStats s = stats();
  auto agg = [](const StatArray& a) { return a[idx(StatType::AGGREGATE)]; };
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

std::vector<StatArray*> DeviceCachingAllocator::statArrays() {
  return {&stats_.allocation,     &stats_.segment,         &stats_.active,
          &stats_.inactive_split, &stats_.allocated_bytes, &stats_.reserved_bytes,
          &stats_.active_bytes,   &stats_.inactive_split_bytes, &stats_.requested_bytes};
}

Block* DeviceCachingAllocator::findFreeBlock(const AllocatorSettings& settings, BlockPool& pool,
                                             nrtStream_t stream, size_t size) {
  auto it = pool.blocks.lower_bound(BlockKey{stream, size, nullptr});
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // max_split_size_mb: oversize blocks are kept whole, for requests of about their own size.
  if (size < settings.max_split_size && block->size >= settings.max_split_size) return nullptr;
  if (size >= settings.max_split_size &&
      block->size >= size + settings.max_non_split_rounding_size) {
    return nullptr;
  }
  removeFree(pool, it);
  return block;
}

Block* DeviceCachingAllocator::allocSegment(const AllocatorSettings& settings, BlockPool& pool,
                                            nrtStream_t stream, size_t size,
                                            const std::shared_ptr<c10::GatheredContext>& context) {
  const size_t bytes = segmentSize(settings, size);
  if (!fitsLimits(settings, bytes)) return nullptr;
  void* ptr = nullptr;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    if (nrtMalloc(&ptr, bytes) != NRT_SUCCESS) {
      runtime_refusal_ = nrtGetRecentErrMsg();
      return nullptr;
    }
  }
  stats_.num_device_alloc++;
  forEachStat(pool, [&](StatType t) {
    stats_.segment[idx(t)].increase(1);
    stats_.reserved_bytes[idx(t)].increase(bytes);
  });
  if (bytes >= settings.max_split_size) stats_.oversize_segments.increase(1);
  auto* block = new Block(device_, stream, bytes, &pool, ptr);
  segments_.push_back(std::make_unique<Segment>(
      Segment{static_cast<char*>(ptr), bytes, stream, &pool, false, block, bytes, context}));
  block->segment = segments_.back().get();
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::SEGMENT_ALLOC, reinterpret_cast<size_t>(ptr), bytes, stream, context);
  }
  return block;
}

// Allocation events for torch.profiler's profile_memory (memory views, NPU Mem columns).
void DeviceCachingAllocator::reportToProfiler(const Block* block, int64_t delta) {
  c10::reportMemoryUsageToProfiler(block->ptr, delta, stats_.allocated_bytes[0].current,
                                   stats_.reserved_bytes[0].current,
                                   c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device_)));
}

Block* DeviceCachingAllocator::splitAndActivate(Block* block, BlockPool& pool, size_t size,
                                                size_t request) {
  const AllocatorSettings& settings = allocatorSettings();
  const size_t remaining = block->size - size;
  const bool split = (pool.is_small || block->segment->expandable)
                         ? remaining >= kMinBlockSize
                         : (size < settings.max_split_size && remaining > kSmallSize);
  if (split) {
    addFree(pool, splitOff(block, size));
  }
  block->allocated = true;
  block->requested = request;
  forEachStat(block, [&](StatType t) {
    stats_.allocation[idx(t)].increase(1);
    stats_.allocated_bytes[idx(t)].increase(block->size);
    stats_.active[idx(t)].increase(1);
    stats_.active_bytes[idx(t)].increase(block->size);
    stats_.requested_bytes[idx(t)].increase(request);
  });
  if (!pool.is_small && block->size >= settings.max_split_size) {
    stats_.oversize_allocations.increase(1);
  }
  return block;
}

// Splits `block` at `offset`: it keeps the first part, the returned block (linked after it, same
// state) is the rest.
Block* DeviceCachingAllocator::splitOff(Block* block, size_t offset) {
  Block* rest = recycler_.newBlock(device_, block->stream, block->size - offset, block->pool,
                                   static_cast<char*>(block->ptr) + offset);
  rest->mapped = block->mapped;
  rest->segment = block->segment;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next) rest->next->prev = rest;
  block->next = rest;
  block->size = offset;
  return rest;
}

// Returns a no-longer-used block to its pool (active stats), merging it with free neighbours.
void DeviceCachingAllocator::freeBlock(Block* block) {
  const size_t original = block->size;
  if (block->pool->is_shared) planner_.onFree(block->plan_step, block->plan_index);
  forEachStat(block, [&](StatType t) {
    stats_.active[idx(t)].decrease(1);
    stats_.active_bytes[idx(t)].decrease(original);
  });
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::FREE_COMPLETED, reinterpret_cast<size_t>(block->ptr), block->requested,
                block->stream, nullptr);
  }
  insertFree(block);
}

// Puts a free, mapped block into its pool, merged with its free mapped neighbours.
void DeviceCachingAllocator::insertFree(Block* block) {
  BlockPool& pool = *block->pool;
  for (Block* neighbour : {block->prev, block->next}) {
    if (!neighbour || neighbour->allocated || neighbour->pending_events > 0 || !neighbour->mapped) {
      continue;
    }
    removeFree(pool, neighbour);
    absorbNeighbour(block, neighbour);
    recycler_.deleteBlock(neighbour);
  }
  addFree(pool, block);
}

// A free block enters its pool's free sets (by size, and by address in the expandable pool) with its
// garbage-collection age reset; while listed, a split block counts as an inactive split.
void DeviceCachingAllocator::addFree(BlockPool& pool, Block* block) {
  block->gc_count = 0;
  recycler_.insert(pool.blocks, block);
  if (pool.is_shared) recycler_.insert(pool.by_address, block);
  countInactiveSplit(block, true);
}

void DeviceCachingAllocator::removeFree(BlockPool& pool, BlockSet::const_iterator it) {
  Block* block = *it;
  recycler_.erase(pool.blocks, it);
  if (pool.is_shared) recycler_.erase(pool.by_address, block);
  countInactiveSplit(block, false);
}

void DeviceCachingAllocator::removeFree(BlockPool& pool, Block* block) {
  auto it = pool.blocks.find(block);
  if (it != pool.blocks.end()) removeFree(pool, it);
}

void DeviceCachingAllocator::countInactiveSplit(const Block* block, bool listed) {
  if (!block->is_split()) return;
  forEachStat(block, [&](StatType t) {
    if (listed) {
      stats_.inactive_split[idx(t)].increase(1);
      stats_.inactive_split_bytes[idx(t)].increase(block->size);
    } else {
      stats_.inactive_split[idx(t)].decrease(1);
      stats_.inactive_split_bytes[idx(t)].decrease(block->size);
    }
  });
}

void DeviceCachingAllocator::processEvents() {
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

void DeviceCachingAllocator::synchronizePendingEvents() {
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
void DeviceCachingAllocator::synchronizeDevice() {
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  NPU_CHECK(nrtDeviceSynchronize());
}

// Returns every unused cached page to the runtime (after synchronizeDevice()): whole free
// segments, and the free pages of expandable segments.
void DeviceCachingAllocator::releaseCachedBlocks() {
  for (BlockPool* pool : {&small_, &large_, &expandable_}) {
    std::vector<Block*> free_blocks(pool->blocks.begin(), pool->blocks.end());
    for (Block* block : free_blocks) {
      // A graph replays into its pool's memory for as long as the pool has users.
      if (inLivePool(block)) continue;
      if (block->segment->expandable) {
        unmapFreePages(block);
      } else if (!block->is_split()) {
        pool->blocks.erase(block);
        releaseSegment(block->segment);
      }
    }
  }
}

// Frees a whole segment whose only block is free (and in no pool any more).
void DeviceCachingAllocator::releaseSegment(Segment* segment) {
  BlockPool& pool = *segment->pool;
  Block* block = segment->head;
  const size_t bytes = segment->expandable ? 0 : segment->size;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  if (segment->expandable) {
    pool.unmapped.erase(block);
    nrtReleaseMemAddress(segment->base);
  } else {
    nrtFree(segment->base);
    stats_.num_device_free++;
    if (bytes >= allocatorSettings().max_split_size) stats_.oversize_segments.decrease(1);
  }
  forEachStat(pool, [&](StatType t) {
    stats_.segment[idx(t)].decrease(1);
    stats_.reserved_bytes[idx(t)].decrease(bytes);
  });
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::SEGMENT_FREE, reinterpret_cast<size_t>(segment->base), segment->size,
                segment->stream, nullptr);
  }
  delete block;
  segments_.remove_if([segment](const std::unique_ptr<Segment>& s) { return s.get() == segment; });
}

size_t DeviceCachingAllocator::allowedMemory() {
  size_t free_bytes = 0, total = 0;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  if (nrtMemGetInfo(&free_bytes, &total) != NRT_SUCCESS) total = 0;
  const double fraction = allocatorSettings().per_process_memory_fraction;
  if (fraction < 1.0) total = static_cast<size_t>(fraction * static_cast<double>(total));
  return limited_ ? std::min(limit_, total) : total;
}

bool DeviceCachingAllocator::fitsLimits(const AllocatorSettings& settings, size_t bytes) {
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes[0].current);
  if (limited_ && reserved + bytes > limit_) return false;
  if (settings.per_process_memory_fraction >= 1.0) return true;
  if (reserved + bytes <= allowedMemory()) return true;
  // As torch_npu: the rejection is counted (and a serving process can watch the counter).
  if (settings.throw_on_npumalloc_oom) ++oom_rejections_;
  return false;
}

// garbage_collection_threshold: once the reserve passes that fraction of the allowed memory
// (the per-process fraction, else the device), free the cached whole segments that have gone
// unused longest (at least the average age), as PyTorch's CUDA allocator does. Only segments
// whose stream is idle are freed, so no queued task can still be touching them.
void DeviceCachingAllocator::collectGarbage(const AllocatorSettings& settings) {
  const auto threshold =
      static_cast<size_t>(settings.garbage_collection_threshold * static_cast<double>(allowedMemory()));
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes[0].current);
  if (reserved <= threshold) return;
  const size_t target = reserved - threshold;
  std::vector<Block*> candidates;
  double total_age = 0;
  for (Block* b : large_.blocks) {
    if (!b->is_split() && !b->segment->expandable && !inLivePool(b)) {
      candidates.push_back(b);
      total_age += static_cast<double>(b->gc_count);
    }
  }
  size_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && !candidates.empty()) {
    const double age_threshold = total_age / static_cast<double>(candidates.size());
    freed = false;
    for (auto it = candidates.begin(); it != candidates.end();) {
      Block* b = *it;
      if (static_cast<double>(b->gc_count) < age_threshold || nrtStreamQuery(b->stream) != NRT_SUCCESS) {
        ++it;
        continue;
      }
      freed = true;
      reclaimed += b->size;
      total_age -= static_cast<double>(b->gc_count);
      it = candidates.erase(it);
      large_.blocks.erase(b);
      releaseSegment(b->segment);
    }
  }
}

void DeviceCachingAllocator::throwOutOfMemory(size_t request, std::unique_lock<std::mutex>& lock) {
  size_t free_bytes = 0, total = 0;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    nrtMemGetInfo(&free_bytes, &total);
  }
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::OOM, free_bytes, request, nullptr, nullptr);
  }
  const auto allocated = stats_.allocated_bytes[0].current;
  const auto reserved = stats_.reserved_bytes[0].current;
  std::ostringstream os;
  os << "NPU out of memory. Tried to allocate " << formatBytes(request) << " (npu:" << device_
     << "; " << formatBytes(total) << " total capacity; " << formatBytes(free_bytes)
     << " free; " << formatBytes(allocated) << " allocated by PyTorch; " << formatBytes(reserved)
     << " reserved in total by PyTorch";
  if (limited_) os << "; per-process limit " << formatBytes(limit_);
  const AllocatorSettings& settings = allocatorSettings();
  if (settings.per_process_memory_fraction < 1.0) {
    os << "; PYTORCH_NPU_ALLOC_CONF per_process_memory_fraction " << settings.per_process_memory_fraction
       << (settings.throw_on_npumalloc_oom ? " with throw_on_npumalloc_oom:True" : "");
  }
  os << "). Free tensors you no longer need, reduce the batch size, or raise the software NPU's "
        "capacity with NPU_SIM_MEMORY.";
  if (reserved - allocated > allocated / 2 && !settings.expandable_segments) {
    os << " If reserved but unallocated memory is large, try "
          "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
  }
  if (!runtime_refusal_.empty()) os << " The runtime refused the allocation: " << runtime_refusal_;
  runtime_refusal_.clear();
  os << "\n";
  lock.unlock();  // summary() takes the lock again
  std::string text = os.str() + summary();
  TORCH_CHECK_WITH(OutOfMemoryError, false, text);
}

}  // namespace c10_npu::NPUCachingAllocator

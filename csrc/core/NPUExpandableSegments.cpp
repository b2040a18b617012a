// NPUExpandableSegments.cpp - expandable_segments:True: one reserved address range per stream,
// shared by blocks of every size, whose pages are mapped as it grows and unmapped when the cache is
// emptied, so that the reserve follows the working set; recurring steps take their planned addresses.
#include <c10/core/DeviceGuard.h>

#include "csrc/core/NPUDeviceCachingAllocator.h"

namespace c10_npu::NPUCachingAllocator {

using c10::CachingAllocator::StatType;

namespace {
size_t idx(StatType t) { return static_cast<size_t>(t); }
size_t roundUp(size_t value, size_t step) { return (value + step - 1) / step * step; }
}  // namespace

Segment* DeviceCachingAllocator::expandableSegmentFor(
    BlockPool& pool, nrtStream_t stream, const std::shared_ptr<c10::GatheredContext>& context) {
  for (const auto& segment : segments_) {
    if (segment->expandable && segment->pool == &pool && segment->stream == stream) {
      return segment.get();
    }
  }
  // The whole device's capacity in addresses: reserving costs nothing, and the segment can then
  // grow as far as the capacity allows.
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
  size_t free_bytes = 0, total = 0;
  if (nrtMemGetInfo(&free_bytes, &total) != NRT_SUCCESS) return nullptr;
  const size_t size = roundUp(std::max(total, kExpandableLargeStep), page_size_);
  void* base = nullptr;
  if (nrtReserveMemAddress(&base, size) != NRT_SUCCESS) return nullptr;
  auto* block = new Block(device_, stream, size, &pool, base);
  block->mapped = false;
  segments_.push_back(std::make_unique<Segment>(
      Segment{static_cast<char*>(base), size, stream, &pool, true, block, 0, context}));
  block->segment = segments_.back().get();
  pool.unmapped.insert(block);
  forEachStat(pool, [&](StatType t) { stats_.segment[idx(t)].increase(1); });
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::SEGMENT_ALLOC, reinterpret_cast<size_t>(base), 0, stream, context);
  }
  return block->segment;
}

// Maps enough pages of the stream's expandable segment for a free block of `size` bytes (the new
// pages continue a free block that ends where they start, if there is one) and hands that block
// out; nullptr when the capacity or the memory fraction does not allow it.
Block* DeviceCachingAllocator::growExpandable(BlockPool& pool, nrtStream_t stream, size_t size,
                                              const std::shared_ptr<c10::GatheredContext>& context) {
  Segment* segment = expandableSegmentFor(pool, stream, context);
  if (segment == nullptr) return nullptr;
  Block* target = nullptr;
  size_t before = 0;
  for (Block* b = segment->head; b != nullptr; b = b->next) {
    if (b->mapped) continue;
    const Block* p = b->prev;
    before = (p && p->mapped && !p->allocated && p->pending_events == 0) ? p->size : 0;
    if (before + b->size >= size) {
      target = b;
      break;
    }
  }
  if (target == nullptr) return nullptr;
  const size_t step = size <= kSmallSize ? kExpandableSmallStep : kExpandableLargeStep;
  const size_t need = std::min(roundUp(size - before, step), target->size);
  if (!fitsLimits(allocatorSettings(), need)) return nullptr;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    if (nrtMapMem(target->ptr, need) != NRT_SUCCESS) {
      runtime_refusal_ = nrtGetRecentErrMsg();
      return nullptr;
    }
  }
  stats_.num_device_alloc++;
  segment->mapped += need;
  forEachStat(pool, [&](StatType t) { stats_.reserved_bytes[idx(t)].increase(need); });
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::SEGMENT_MAP, reinterpret_cast<size_t>(target->ptr), need, stream,
                context);
  }
  pool.unmapped.erase(target);
  Block* mapped = target;
  if (need < target->size) {
    Block* rest = splitOff(target, need);  // still unmapped
    pool.unmapped.insert(rest);
  }
  mapped->mapped = true;
  insertFree(mapped);
  // The new pages, with the free block before them, now hold `size`: the best fit finds it.
  return findFreeBlock(allocatorSettings(), pool, stream, size);
}

// Unmaps the whole pages inside a free block of an expandable segment; the parts of pages shared
// with neighbours stay mapped. A segment left without mapped pages is released.
void DeviceCachingAllocator::unmapFreePages(Block* block) {
  char* const begin = static_cast<char*>(block->ptr);
  char* const end = begin + block->size;
  const auto page = static_cast<uintptr_t>(page_size_);
  char* first = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page);
  char* last = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(end) / page * page);
  if (last <= first) return;
  BlockPool& pool = *block->pool;
  Segment* segment = block->segment;
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, device_));
    if (nrtUnmapMem(first, static_cast<size_t>(last - first)) != NRT_SUCCESS) return;
  }
  const auto bytes = static_cast<size_t>(last - first);
  segment->mapped -= bytes;
  stats_.num_device_free++;
  forEachStat(pool, [&](StatType t) { stats_.reserved_bytes[idx(t)].decrease(bytes); });
  if (record_history_.load(std::memory_order_relaxed)) {
    recordTrace(TraceEntry::SEGMENT_UNMAP, reinterpret_cast<size_t>(first), bytes, block->stream,
                nullptr);
  }
  removeFree(pool, block);
  Block* hole = first > begin ? splitOff(block, static_cast<size_t>(first - begin)) : block;
  Block* tail = last < end ? splitOff(hole, static_cast<size_t>(last - first)) : nullptr;
  hole->mapped = false;
  for (Block* piece : {hole != block ? block : nullptr, tail}) {
    if (piece) insertFree(piece);  // the partial pages at either end stay cached
  }
  insertUnmapped(hole);
  if (segment->head->next == nullptr && !segment->head->mapped) releaseSegment(segment);
}

// Puts unmapped address space into its pool, merged with unmapped neighbours.
void DeviceCachingAllocator::insertUnmapped(Block* block) {
  BlockPool& pool = *block->pool;
  for (Block* neighbour : {block->prev, block->next}) {
    if (!neighbour || neighbour->mapped) continue;
    recycler_.erase(pool.unmapped, neighbour);
    absorbNeighbour(block, neighbour);
    recycler_.deleteBlock(neighbour);
  }
  recycler_.insert(pool.unmapped, block);
}

// Takes [ptr, ptr + size) out of the free block that holds it (the part before it stays free; the
// caller splits off the part after it), or returns nullptr if that range is not free on `stream`.
Block* DeviceCachingAllocator::takeFreeRange(BlockPool& pool, nrtStream_t stream, char* ptr,
                                             size_t size) {
  auto it = pool.by_address.upper_bound(static_cast<const void*>(ptr));
  if (it == pool.by_address.begin()) return nullptr;
  Block* block = *--it;
  char* const begin = static_cast<char*>(block->ptr);
  if (block->stream != stream || ptr + size > begin + block->size) return nullptr;
  removeFree(pool, block);
  if (ptr == begin) return block;
  Block* taken = splitOff(block, static_cast<size_t>(ptr - begin));
  addFree(pool, block);
  return taken;
}

// Hands the step planner what the next step may use: per stream's expandable segment, the ranges
// held by live blocks (or not mapped), and which of this step's requests are still alive where.
void DeviceCachingAllocator::endStep() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!allocatorSettings().expandable_segments) {
    planner_.reset();
    return;
  }
  std::vector<PlanSpace> spaces;
  std::vector<std::pair<uint32_t, char*>> live;
  for (const auto& segment : segments_) {
    if (!segment->expandable || segment->pool != &expandable_) continue;
    PlanSpace space{segment->stream, segment->base, segment->base + segment->size, {}};
    for (Block* b = segment->head; b != nullptr; b = b->next) {
      const bool in_use = b->allocated || b->pending_events > 0;
      if (b->mapped && !in_use) continue;
      char* const p = static_cast<char*>(b->ptr);
      if (!space.occupied.empty() && space.occupied.back().second == p) {
        space.occupied.back().second = p + b->size;
      } else {
        space.occupied.emplace_back(p, p + b->size);
      }
      if (in_use && b->plan_step == planner_.step()) live.emplace_back(b->plan_index, p);
    }
    spaces.push_back(std::move(space));
  }
  planner_.endStep(spaces, live);
}

StepPlanStats DeviceCachingAllocator::stepPlanStats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return planner_.stats();
}

}  // namespace c10_npu::NPUCachingAllocator

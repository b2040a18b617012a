// NPUMemoryHistory.cpp - memory history of one device's caching allocator: stack contexts of live
// blocks, the ring of allocator events, and the segment/block view of a snapshot.
#include <chrono>

#include "csrc/core/NPUDeviceCachingAllocator.h"

namespace c10_npu::NPUCachingAllocator {

std::shared_ptr<c10::GatheredContext> DeviceCachingAllocator::maybeGatherContext(RecordContext level) {
  if (C10_LIKELY(record_context_.load(std::memory_order_relaxed) < level)) return nullptr;
  CreateContextFn fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn = context_fn_;
  }
  return fn ? fn() : nullptr;
}

void DeviceCachingAllocator::recordTrace(TraceEntry::Action action, size_t addr, size_t size,
                                         nrtStream_t stream,
                                         std::shared_ptr<c10::GatheredContext> context) {
  TraceEntry entry(action, static_cast<c10::DeviceIndex>(device_), addr, size, stream, {0, 0}, 0,
                   std::move(context));
  entry.time_.t_ = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  if (trace_.size() < max_entries_) {
    trace_.push_back(std::move(entry));
  } else if (max_entries_ > 0) {
    trace_[trace_next_] = std::move(entry);
    trace_next_ = (trace_next_ + 1) % max_entries_;
  }
}

void DeviceCachingAllocator::recordHistory(bool enabled, CreateContextFn context_fn,
                                           size_t max_entries, RecordContext when, bool clear) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (clear || !enabled || max_entries != max_entries_) {
    // A new capacity restarts the ring (in order); so does turning recording off.
    std::vector<TraceEntry> kept;
    if (enabled && !clear) {
      for (size_t i = 0; i < trace_.size() && kept.size() < max_entries; ++i) {
        kept.push_back(trace_[(trace_next_ + i) % trace_.size()]);
      }
    }
    trace_ = std::move(kept);
    trace_next_ = 0;
  }
  max_entries_ = enabled ? max_entries : 0;
  context_fn_ = enabled ? context_fn : nullptr;
  record_context_.store(enabled ? when : RecordContext::NEVER);
  record_history_.store(enabled && max_entries > 0);
}

std::vector<SegmentInfo> DeviceCachingAllocator::segments() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (record_history_.load()) {
    recordTrace(TraceEntry::SNAPSHOT, 0, 0, nullptr, nullptr);
  }
  std::vector<SegmentInfo> result;
  for (const auto& segment : segments_) {
    // One entry per contiguous mapped run: an expandable segment may have holes.
    for (const Block* block = segment->head; block != nullptr;) {
      if (!block->mapped) {
        block = block->next;
        continue;
      }
      SegmentInfo info;
      info.device = static_cast<c10::DeviceIndex>(device_);
      info.address = reinterpret_cast<size_t>(block->ptr);
      info.stream = segment->stream;
      if (auto pool = pool_of_token_.find(segment->stream); pool != pool_of_token_.end()) {
        info.owner_private_pool_id = pool->second;  // a graph's or MemPool's segment
      }
      info.is_large = !segment->pool->is_small;
      info.is_expandable = segment->expandable;
      info.context_when_allocated = segment->context;
      for (; block != nullptr && block->mapped; block = block->next) {
        auto& b = info.blocks.emplace_back();
        b.size = block->size;
        b.requested_size = block->allocated ? block->requested : 0;
        b.allocated = block->allocated;
        b.active = block->allocated || block->pending_events > 0;
        b.gc_counter = static_cast<int32_t>(block->gc_count);
        b.context_when_allocated = block->context;
        info.total_size += block->size;
        if (b.allocated) {
          info.allocated_size += block->size;
          info.requested_size += block->requested;
        }
        if (b.active) info.active_size += block->size;
      }
      result.push_back(std::move(info));
    }
  }
  return result;
}

std::vector<TraceEntry> DeviceCachingAllocator::trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TraceEntry> ordered;
  ordered.reserve(trace_.size());
  for (size_t i = 0; i < trace_.size(); ++i) ordered.push_back(trace_[(trace_next_ + i) % trace_.size()]);
  return ordered;
}

}  // namespace c10_npu::NPUCachingAllocator

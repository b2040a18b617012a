// NPUBlockPool.h - the blocks and pools of the caching allocator (a block is a slice of a segment
// obtained from the runtime; free blocks are kept per stream, ordered by size for best fit).
#pragma once

#include <npu/runtime.h>

#include <cstddef>
#include <set>
#include <unordered_set>

namespace c10_npu::NPUCachingAllocator {

constexpr size_t kMinBlockSize = 512;        // every size is rounded up to this
constexpr size_t kSmallSize = 1048576;       // requests up to 1 MiB use the small pool
constexpr size_t kSmallBuffer = 2097152;     // small-pool segments are 2 MiB
constexpr size_t kLargeBuffer = 20971520;    // mid-size requests get 20 MiB segments
constexpr size_t kMinLargeAlloc = 10485760;  // from 10 MiB a segment fits the request
constexpr size_t kRoundLarge = 2097152;      // large segments are rounded to 2 MiB

struct BlockPool;

struct Block {
  int device;
  nrtStream_t stream;  // allocation stream: the block is reused freely only on this stream
  size_t size;
  size_t requested = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours within the same segment
  Block* next = nullptr;
  std::unordered_set<nrtStream_t> stream_uses;  // other streams that used it (record_stream)
  int pending_events = 0;

  Block(int device, nrtStream_t stream, size_t size, BlockPool* pool, void* ptr)
      : device(device), stream(stream), size(size), ptr(ptr), pool(pool) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

struct BlockComparator {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  std::set<Block*, BlockComparator> blocks;
  const bool is_small;
};

inline size_t roundSize(size_t size) {
  return size < kMinBlockSize ? kMinBlockSize : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

inline size_t segmentSize(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace c10_npu::NPUCachingAllocator

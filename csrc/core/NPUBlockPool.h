// NPUBlockPool.h - the blocks and pools of the caching allocator (a block is a slice of a segment
// obtained from the runtime; free blocks are kept per stream, ordered by size for best fit), and
// request rounding.
#pragma once

#include <c10/core/Allocator.h>
#include <npu/runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "csrc/core/NPUAllocatorConfig.h"

namespace c10_npu::NPUCachingAllocator {

constexpr size_t kMinBlockSize = 512;        // every size is rounded up to this
constexpr size_t kSmallSize = 1048576;       // requests up to 1 MiB use the small pool
constexpr size_t kSmallBuffer = 2097152;     // small-pool segments are 2 MiB
constexpr size_t kMinLargeAlloc = 10485760;  // from 10 MiB a segment fits the request
constexpr size_t kRoundLarge = 2097152;      // large segments are rounded to 2 MiB
// Expandable segments grow by mapping pages in these steps. Host-backed device memory maps
// cheaply, so the steps are small: the reserve follows the working set closely.
constexpr size_t kExpandableSmallStep = 262144;
constexpr size_t kExpandableLargeStep = 2097152;

struct BlockPool;
struct Segment;

struct Block {
  int device;
  nrtStream_t stream;  // allocation stream: the block is reused freely only on this stream
  size_t size;
  size_t requested = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  bool mapped = true;  // false only for the unmapped parts of an expandable segment
  Block* prev = nullptr;  // neighbours within the same segment
  Block* next = nullptr;
  Segment* segment = nullptr;  // the runtime memory it is a slice of
  std::unordered_set<nrtStream_t> stream_uses;  // other streams that used it (record_stream)
  int pending_events = 0;
  size_t gc_count = 0;  // allocation attempts since it was freed (garbage_collection_threshold)
  std::shared_ptr<c10::GatheredContext> context;  // where it was allocated (memory history)
  // Expandable segments: the step and the index in it of the request it serves (NPUStepPlanner).
  uint32_t plan_step = 0;
  uint32_t plan_index = 0;

  Block(int device, nrtStream_t stream, size_t size, BlockPool* pool, void* ptr)
      : device(device), stream(stream), size(size), ptr(ptr), pool(pool) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
};

// What a pool's free blocks are ordered by; lookups use it without building a Block.
struct BlockKey {
  nrtStream_t stream;
  size_t size;
  const void* ptr;
};

struct BlockComparator {
  using is_transparent = void;
  static BlockKey key(const Block* b) { return {b->stream, b->size, b->ptr}; }
  static const BlockKey& key(const BlockKey& k) { return k; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const BlockKey& x = key(a);
    const BlockKey& y = key(b);
    if (x.stream != y.stream) return x.stream < y.stream;
    if (x.size != y.size) return x.size < y.size;
    return x.ptr < y.ptr;
  }
};

using BlockSet = std::set<Block*, BlockComparator>;

// Free blocks by address (the expandable range's), to take a planned address range.
struct BlockAddressComparator {
  using is_transparent = void;
  static const void* key(const Block* b) { return b->ptr; }
  static const void* key(const void* p) { return p; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const { return key(a) < key(b); }
};

using AddressSet = std::set<Block*, BlockAddressComparator>;

struct BlockPool {
  explicit BlockPool(bool small, bool shared = false) : is_small(small), is_shared(shared) {}
  BlockSet blocks;    // free, mapped
  AddressSet by_address;  // the same blocks by address (only in the shared, expandable pool)
  BlockSet unmapped;  // free address space of expandable segments
  const bool is_small;
  // Blocks of every size (the expandable range): a block's statistics go by its own size class.
  const bool is_shared;
};

// Recycles what splitting and merging free blocks would otherwise take from the heap on every small
// allocation and free: the tree nodes (node handles moved from an erase to the next insert; the two
// set types share a node type) and the Block objects. Used under the allocator's lock.
class BlockRecycler {
 public:
  static_assert(std::is_same_v<BlockSet::node_type, AddressSet::node_type>,
                "free-block sets must share their node type to share recycled nodes");
  BlockRecycler() {
    spare_.reserve(kMaxSpare);
    nodes_.reserve(kMaxNodes);
  }
  ~BlockRecycler() {
    for (void* p : spare_) ::operator delete(p, sizeof(Block));
  }
  BlockRecycler(const BlockRecycler&) = delete;
  BlockRecycler& operator=(const BlockRecycler&) = delete;

  template <typename Set>
  void erase(Set& set, typename Set::const_iterator it) { keep(set.extract(it)); }
  template <typename Set>
  void erase(Set& set, Block* block) {
    auto it = set.find(block);
    if (it != set.end()) keep(set.extract(it));
  }
  template <typename Set>
  void insert(Set& set, Block* block) {
    if (nodes_.empty()) {
      set.insert(block);
      return;
    }
    BlockSet::node_type node = std::move(nodes_.back());
    nodes_.pop_back();
    node.value() = block;
    set.insert(std::move(node));
  }
  template <typename... Args>
  Block* newBlock(Args&&... args) {
    if (spare_.empty()) return new Block(std::forward<Args>(args)...);
    void* memory = spare_.back();
    spare_.pop_back();
    return new (memory) Block(std::forward<Args>(args)...);
  }
  void deleteBlock(Block* block) {
    if (spare_.size() >= kMaxSpare) {
      delete block;
      return;
    }
    block->~Block();
    spare_.push_back(block);
  }

 private:
  static constexpr size_t kMaxSpare = 64;
  static constexpr size_t kMaxNodes = 8;
  void keep(BlockSet::node_type node) {
    if (nodes_.size() < kMaxNodes) nodes_.push_back(std::move(node));
  }
  std::vector<BlockSet::node_type> nodes_;
  std::vector<void*> spare_;
};

// Whether a block counts as a small-pool block in the statistics.
inline bool countsAsSmall(const Block* block) {
  return block->pool->is_shared ? block->size <= kSmallSize : block->pool->is_small;
}


// A request's size as the allocator hands it out: 512-byte multiples, or with
// roundup_power2_divisions:N the next of N steps between two powers of two (fewer distinct sizes
// for varying shapes, so cached blocks are reused more).
inline size_t roundSize(const AllocatorSettings& settings, size_t size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  const size_t divisions = roundupPower2Divisions(settings, size);
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    size_t floor = size_t{1} << (63 - __builtin_clzll(size));  // the power of two at or below
    const size_t step = floor / divisions;
    if (step == 0) return floor << 1;
    const size_t rounded = size & ~(step - 1);
    return rounded == size ? size : rounded + step;
  }
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// The segment a request of `size` gets when no cached block fits (without expandable segments).
inline size_t segmentSize(const AllocatorSettings& settings, size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return settings.large_segment_size;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace c10_npu::NPUCachingAllocator

// ObjectPool.cpp - size-class free lists per thread, with a lock-free list for blocks that other
// threads free (pushed by any thread, taken whole by the owner: no ABA problem).
#include "ObjectPool.h"

#include <atomic>
#include <cstdint>
#include <new>

namespace npu::opslib {
namespace {

constexpr size_t kClassSizes[] = {64, 128, 256, 512, 1024};
constexpr int kClasses = sizeof(kClassSizes) / sizeof(kClassSizes[0]);
constexpr int kUnpooled = kClasses;
constexpr int kMaxLocalBlocks = 512;  // per class: beyond this, freed blocks go back to the heap

struct ThreadCache;

// Precedes every block; 16 bytes keep the payload aligned for any object.
struct alignas(16) Header {
  ThreadCache* owner;
  int size_class;
};

struct FreeBlock {
  FreeBlock* next;
};

struct ThreadCache {
  FreeBlock* local[kClasses] = {};
  int local_count[kClasses] = {};
  std::atomic<FreeBlock*> remote[kClasses] = {};
  std::atomic<bool> alive{true};
  ThreadCache* next_retired = nullptr;

  // The thread ends: blocks it still owns elsewhere are freed to the heap from now on. The cache
  // itself is never freed, since such blocks still point at it.
  void Retire() {
    alive.store(false, std::memory_order_seq_cst);
    // Kept on a process-wide list: still reachable, so leak checkers do not report it.
    next_retired = retired.load(std::memory_order_relaxed);
    while (!retired.compare_exchange_weak(next_retired, this, std::memory_order_release)) {
    }
    for (int c = 0; c < kClasses; ++c) {
      Release(local[c]);
      local[c] = nullptr;
      local_count[c] = 0;
      Release(remote[c].exchange(nullptr, std::memory_order_acquire));
    }
  }
  static inline std::atomic<ThreadCache*> retired{nullptr};

  static void Release(FreeBlock* list) {
    while (list != nullptr) {
      FreeBlock* next = list->next;
      ::operator delete(reinterpret_cast<Header*>(list) - 1);
      list = next;
    }
  }
};

struct CacheHolder {
  ThreadCache* cache = new ThreadCache;
  ~CacheHolder() { cache->Retire(); }
};

// One per thread; blocks record it as their owner.
ThreadCache& Cache() {
  thread_local CacheHolder holder;
  return *holder.cache;
}

int ClassOf(size_t size) {
  for (int c = 0; c < kClasses; ++c) {
    if (size <= kClassSizes[c]) return c;
  }
  return kUnpooled;
}

}  // namespace

void* PoolAllocate(size_t size) {
  const int c = ClassOf(size);
  ThreadCache& cache = Cache();
  if (c != kUnpooled) {
    FreeBlock* block = cache.local[c];
    if (block == nullptr) {
      block = cache.remote[c].exchange(nullptr, std::memory_order_acquire);
      cache.local_count[c] = 0;  // recounted lazily: only bounds how many are kept
    }
    if (block != nullptr) {
      cache.local[c] = block->next;
      if (cache.local_count[c] > 0) --cache.local_count[c];
      return block;
    }
  }
  const size_t bytes = c == kUnpooled ? size : kClassSizes[c];
  auto* header = static_cast<Header*>(::operator new(sizeof(Header) + bytes));
  header->owner = c == kUnpooled ? nullptr : &cache;
  header->size_class = c;
  return header + 1;
}

void PoolFree(void* p) noexcept {
  if (p == nullptr) return;
  Header* header = static_cast<Header*>(p) - 1;
  const int c = header->size_class;
  ThreadCache* owner = header->owner;
  if (c == kUnpooled || owner == nullptr) {
    ::operator delete(header);
    return;
  }
  auto* block = static_cast<FreeBlock*>(p);
  ThreadCache& mine = Cache();
  if (owner == &mine) {
    if (mine.local_count[c] >= kMaxLocalBlocks) {
      ::operator delete(header);
      return;
    }
    block->next = mine.local[c];
    mine.local[c] = block;
    ++mine.local_count[c];
    return;
  }
  if (!owner->alive.load(std::memory_order_seq_cst)) {
    ::operator delete(header);
    return;
  }
  FreeBlock* head = owner->remote[c].load(std::memory_order_relaxed);
  do {
    block->next = head;
  } while (!owner->remote[c].compare_exchange_weak(head, block, std::memory_order_release,
                                                   std::memory_order_relaxed));
}

}  // namespace npu::opslib

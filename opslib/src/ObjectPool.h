// ObjectPool.h - recycled memory for the objects every launch creates (descriptors, executors):
// per-thread free lists by size class, so that a warm launch path allocates nothing. Blocks freed on
// another thread (an executor is freed by the stream's worker) go back to their owner's list.
#ifndef NPU_OPSLIB_SRC_OBJECT_POOL_H_
#define NPU_OPSLIB_SRC_OBJECT_POOL_H_

#include <cstddef>

namespace npu::opslib {

// Memory for `size` bytes (suitably aligned for any object); never returns nullptr (throws
// std::bad_alloc like operator new).
void* PoolAllocate(size_t size);
// Frees a block from PoolAllocate, from any thread.
void PoolFree(void* p) noexcept;

// Gives a class pooled operator new / delete.
struct Pooled {
  static void* operator new(size_t size) { return PoolAllocate(size); }
  static void operator delete(void* p) noexcept { PoolFree(p); }
};

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_OBJECT_POOL_H_

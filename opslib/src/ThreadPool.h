// ThreadPool.h - a small persistent pool that splits large kernels across the host's cores.
#ifndef NPU_OPSLIB_SRC_THREAD_POOL_H_
#define NPU_OPSLIB_SRC_THREAD_POOL_H_

#include <cstdint>

#include "npu/opslib.h"

namespace npu::opslib {

using RangeFn = aclnnParallelRangeFn;

// Runs fn(context, begin, end) over [0, n) in chunks of at least min_chunk elements: on the host
// process's own intra-op pool when one is installed (aclnnSetParallelFor), else on this pool's
// threads and the calling thread, and returns when every chunk has run (rethrowing the first
// exception of a chunk). Runs inline when there is a single chunk, the host has one core, or the
// caller is a pool thread itself (no nested parallelism). Several streams may call it at once:
// their jobs share the pool, and each caller always works on its own job, so none can starve.
void ParallelFor(int64_t n, int64_t min_chunk, void* context, RangeFn fn);

template <typename F>
void ParallelFor(int64_t n, int64_t min_chunk, const F& fn) {
  ParallelFor(n, min_chunk, const_cast<void*>(static_cast<const void*>(&fn)),
              [](void* context, int64_t begin, int64_t end) {
                (*static_cast<const F*>(context))(begin, end);
              });
}

// Threads that a large kernel runs on: the pool's workers plus the caller.
int ParallelThreads();

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_THREAD_POOL_H_

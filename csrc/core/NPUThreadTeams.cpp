// NPUThreadTeams.cpp - OpenMP teams: released by idle stream workers and launching threads, sized by
// whether the host waits, and shared by the op library's own parallel loops.
#include "csrc/core/NPUThreadTeams.h"

#include "csrc/core/NPUResourceLimits.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <npu/opslib.h>
#include <npu/runtime.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

namespace c10_npu {

void sizeWorkerTeam(int host_waiting);

namespace {

// The op library's parallel loops on ATen's intra-op pool: one team of threads for every kernel a
// stream worker runs, whether ATen's or the op library's own. On a worker, the team is sized again
// first: a long kernel that started while the host was launching takes every core once the host
// waits for it.
void atenParallelFor(int64_t n, int64_t min_chunk, void* context, aclnnParallelRangeFn fn) {
  const int host_waiting = nrtWorkerHostWaiting();
  if (host_waiting >= 0 && !at::in_parallel_region()) sizeWorkerTeam(host_waiting);
  at::parallel_for(0, n, min_chunk, [&](int64_t begin, int64_t end) { fn(context, begin, end); });
}

// The runtime's large host copies on ATen's intra-op pool, in 64 KiB chunks.
void parallelHostCopy(void* dst, const void* src, size_t count) {
  constexpr int64_t kChunk = 64 << 10;
  const int64_t chunks = static_cast<int64_t>((count + kChunk - 1) / kChunk);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    const size_t from = static_cast<size_t>(begin * kChunk);
    const size_t to = std::min(count, static_cast<size_t>(end * kChunk));
    std::memcpy(static_cast<char*>(dst) + from, static_cast<const char*>(src) + from, to - from);
  });
}

}  // namespace

namespace detail {
thread_local bool t_launching = false;

void startLaunching() {
  t_launching = true;
  if (nrtOnStreamWorker() == 0) releaseThreadTeam();  // a worker keeps its team while it has work
}
}  // namespace detail

int threadTeamSize() { return omp_get_max_threads(); }

// omp_pause_soft: the calling thread's team threads exit; its next parallel region starts a new team.
void releaseThreadTeam() { omp_pause_resource_all(omp_pause_soft); }

// A worker's team uses every core while the host waits for it, one fewer while the host launches:
// the launching thread would otherwise preempt one of the team's threads, and the others would
// wait for it at every barrier.
void sizeWorkerTeam(int host_waiting) {
  // PyTorch's intra-op thread count (torch.get_num_threads(), OMP_NUM_THREADS), as this worker
  // first sees it.
  thread_local const int threads = at::get_num_threads();
  thread_local int current = 0;
  // torch.use_deterministic_algorithms(True): one team size always, so that CPU reductions (whose
  // summation order follows the team) give the same bits run after run.
  const bool fixed = at::globalContext().deterministicAlgorithms();
  // set_device_limit / set_stream_limit: the vector-core limit's share of the threads.
  const int wanted = std::min(fixed || host_waiting != 0 || threads == 1 ? threads : threads - 1,
                              workerThreadCap(threads));
  if (wanted != current) {
    omp_set_num_threads(wanted);
    current = wanted;
  }
}

void installHostThreads() {
  nrtSetWorkerTaskHook(&sizeWorkerTeam);
  aclnnSetParallelFor(&atenParallelFor);
  nrtSetHostCopy(&parallelHostCopy);
  nrtSetWorkerIdleHook(&releaseThreadTeam);
}

}  // namespace c10_npu

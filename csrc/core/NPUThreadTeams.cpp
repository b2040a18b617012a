// NPUThreadTeams.cpp - OpenMP teams: released by idle stream workers and launching threads, sized by
// whether the host waits, and shared by the op library's own parallel loops; the runtime's large host copies.
#include "csrc/core/NPUThreadTeams.h"

#include "csrc/core/NPUResourceLimits.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <npu/opslib.h>
#include <npu/runtime.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

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

// A large host copy shared out in 64 KiB chunks: whoever runs take() copies chunks until none is left.
struct HostCopyJob {
  static constexpr size_t kChunk = 64 << 10;
  char* dst;
  const char* src;
  size_t count;
  int64_t chunks;
  std::atomic<int64_t> next{0};  // the next chunk to claim
  std::atomic<int> copying{0};   // threads between a claim and the end of its chunk

  void take() {
    for (;;) {
      // Counted before the claim: once `next` runs out, the caller waits only for chunks already claimed.
      copying.fetch_add(1, std::memory_order_seq_cst);
      const int64_t i = next.fetch_add(1, std::memory_order_seq_cst);
      if (i < chunks) {
        const size_t from = static_cast<size_t>(i) * kChunk;
        std::memcpy(dst + from, src + from, std::min(kChunk, count - from));
      }
      copying.fetch_sub(1, std::memory_order_seq_cst);
      if (i >= chunks) return;
    }
  }
};

// The runtime's large host copies: the calling thread copies chunks while helpers from ATen's inter-op pool take
// chunks too once they run. Nothing waits for a helper that has not started: an OpenMP team's closing barrier
// did, so with every core busy with other processes each copy waited a scheduler time slice for its second
// thread (a 1 MB copy took 8 ms). A helper that starts after the copy ended finds no chunk and touches nothing.
void parallelHostCopy(void* dst, const void* src, size_t count) {
  auto job = std::make_shared<HostCopyJob>();
  job->dst = static_cast<char*>(dst);
  job->src = static_cast<const char*>(src);
  job->count = count;
  job->chunks = static_cast<int64_t>((count + HostCopyJob::kChunk - 1) / HostCopyJob::kChunk);
  const int helpers = std::max(0, std::min<int>(at::get_num_threads() - 1, static_cast<int>(job->chunks) - 1));
  for (int h = 0; h < helpers; ++h) at::launch([job] { job->take(); });
  job->take();
  while (job->copying.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

}  // namespace

namespace detail {
thread_local bool t_launching = false;

void startLaunching() {
  t_launching = true;
  if (nrtOnStreamWorker() == 0) releaseThreadTeam();  // a worker keeps its team while it has work
}
}  // namespace detail

// MKL's thread count on this thread (mkl_set_num_threads_local, found at run time in PyTorch's library; absent
// without MKL). PyTorch sets MKL's count on the thread that calls torch.set_num_threads only, and MKL's default on
// any other thread is its own (one thread on a 2-core host), so a stream worker's GEMMs and convolutions ran
// single-threaded whatever its OpenMP team: they follow the team once this is set with it.
void setBlasThreads(int threads) {
  using SetLocal = int (*)(const int*);  // the Fortran entry point: by reference
  static const SetLocal set_local = [] {
    void* torch = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    return torch == nullptr ? nullptr : reinterpret_cast<SetLocal>(dlsym(torch, "mkl_set_num_threads_local_"));
  }();
  if (set_local != nullptr) set_local(&threads);
}

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
    setBlasThreads(wanted);
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

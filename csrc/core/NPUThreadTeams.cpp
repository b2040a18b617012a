// NPUThreadTeams.cpp - OpenMP thread teams of idle stream workers and of launching threads are released.
#include "csrc/core/NPUThreadTeams.h"

#include <dlfcn.h>
#include <ATen/Parallel.h>
#include <npu/opslib.h>
#include <npu/runtime.h>

namespace c10_npu {
namespace {

// omp_pause_resource_all (OpenMP 5.0) with omp_pause_soft: the calling thread's team threads exit;
// its next parallel region starts a new team. Looked up at run time: PyTorch's OpenMP runtime is
// loaded with it, and an older runtime without it simply keeps its teams.
using PauseFn = int (*)(int);
constexpr int kOmpPauseSoft = 1;

PauseFn pauseFunction() {
  static const PauseFn fn = reinterpret_cast<PauseFn>(dlsym(RTLD_DEFAULT, "omp_pause_resource_all"));
  return fn;
}

// The op library's parallel loops on ATen's intra-op pool: one team of threads for every kernel a
// stream worker runs, whether ATen's or the op library's own.
void atenParallelFor(int64_t n, int64_t min_chunk, void* context, aclnnParallelRangeFn fn) {
  at::parallel_for(0, n, min_chunk, [&](int64_t begin, int64_t end) { fn(context, begin, end); });
}

}  // namespace

namespace detail {
thread_local bool t_launching = false;

void startLaunching() {
  t_launching = true;
  if (nrtOnStreamWorker() == 0) releaseThreadTeam();  // a worker keeps its team while it has work
}
}  // namespace detail

void releaseThreadTeam() {
  if (PauseFn pause = pauseFunction()) pause(kOmpPauseSoft);
}

void installThreadTeamRelease() {
  aclnnSetParallelFor(&atenParallelFor);
  if (pauseFunction() != nullptr) nrtSetWorkerIdleHook(&releaseThreadTeam);
}

}  // namespace c10_npu

// NPUThreadTeams.h - keeps the process to one busy OpenMP thread team: CPU kernels that stream workers
// run start teams of their own, and idle teams slow every other team down.
#pragma once

namespace c10_npu {

// Why: libgomp counts the threads of every team in the process; once there are more of them than
// CPUs, it stops letting any team's threads spin between parallel regions. So after one npu kernel
// (the stream worker's team), CPU work elsewhere in the process ran a third slower, and npu kernels
// slowed down because of the launching thread's idle team. Two rules keep one team alive at a time:
// - a stream worker releases its team after 2 ms without work (runtime idle hook);
// - a thread that starts launching device work releases its own team (it has stopped computing).
// A worker's team uses every intra-op thread while a host thread waits for it, one fewer while the
// host is still launching (so that the launcher does not preempt a team thread that the others then
// wait for at every barrier). And the op library's parallel kernels, and the runtime's large host
// copies, run on ATen's intra-op pool rather than on a pool of their own, which would compete for
// the same cores.
void installHostThreads();

// Releases the calling thread's OpenMP team, if it has one and is outside a parallel region.
void releaseThreadTeam();

// The thread count the calling thread's next parallel region gets (on a stream worker: what its
// kernels run on now).
int threadTeamSize();

namespace detail {
extern thread_local bool t_launching;
void startLaunching();
}  // namespace detail

// On every device launch: the first one after this thread's last blocking wait releases its team.
inline void noteDeviceLaunch() {
  if (__builtin_expect(!detail::t_launching, 0)) detail::startLaunching();
}
// On every blocking wait for the device: this thread may compute on the CPU next.
inline void noteBlockingWait() { detail::t_launching = false; }

}  // namespace c10_npu

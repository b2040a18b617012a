"""Upstream test files that check chip-specific behaviour a software NPU cannot honestly provide: reported
with the reason by `make upstream-tests` (and in docs/conformance.md), not run. Paths relative to test/."""

CHIP_SPECIFIC = {
    # Two training processes share physical devices: one process's monitor calls stop_device(0) and
    # stop_device(1), and the test needs the *other* process's collectives to stop too (a device stop
    # on hardware reaches every process on the device). Each process has its own software NPUs, so the
    # rank that skipped an iteration leaves its peer waiting in a collective; the file then hangs.
    "npu/test_uce.py": "needs a device stop to reach every process using the device (shared hardware); "
                       "software NPUs are per process, so the peer rank waits in a collective",
    # The children read the output of all_reduce(async_op=True) without work.wait(): on hardware the
    # collective has finished before the host's copy by timing alone. Here it has not, the parent's
    # assertEqual fails before it releases the children (p2c.put), and the children, blocked on
    # p2c.get(), keep the parent's exit waiting for them: a hang that follows from the race.
    "distributed/test_hccl_shared_buffer.py": "reads all_reduce(async_op=True) outputs without work.wait() and "
                                               "relies on hardware collectives finishing first; when the read "
                                               "is early, the test's children block on a queue and the file hangs",
}

"""Running one test file in a process group of its own, with a timeout, for the test runners (make optests,
make upstream-tests); a stopped runner ends every group it started."""

import os
import signal
import subprocess
import time

_running = set()  # process groups of the files being run


def _stop_running(signum, _frame):
    for pid in list(_running):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise SystemExit(128 + signum)


def stop_children_on_signals() -> None:
    """SIGTERM / SIGINT end the running files' process groups, then the runner."""
    signal.signal(signal.SIGTERM, _stop_running)
    signal.signal(signal.SIGINT, _stop_running)


def run_with_timeout(cmd, cwd, env, timeout):
    """(returncode, output text, timed out, seconds) of `cmd`, its whole group killed after `timeout`."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    _running.add(proc.pid)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        _running.discard(proc.pid)
    return proc.returncode, out.decode("utf-8", errors="replace"), timed_out, time.monotonic() - start

"""Launching multi-process distributed tests: every rank is a fresh interpreter in its own process
group, bounded by a hard timeout after which the whole tree is killed, so no test can hang CI or
leave processes behind. Output goes to files (a full pipe must never stall a rank)."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "dist_cases")
_CONTROL_VARS = ("NPU_SIM_DEVICES", "NPU_SIM_MEMORY", "NPU_SIM_FALLBACK", "TORCH_DEVICE_BACKEND_AUTOLOAD",
                 "TORCH_DISTRIBUTED_DEBUG", "HCCL_EXEC_TIMEOUT", "HCCL_CONNECT_TIMEOUT", "HCCL_BLOCKING_WAIT",
                 "HCCL_ASYNC_ERROR_HANDLING", "TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Finished:
    """One process's outcome."""

    def __init__(self, argv, returncode, out, err, seconds):
        self.argv, self.returncode, self.out, self.err, self.seconds = argv, returncode, out, err, seconds

    def __repr__(self):
        return (f"--- {' '.join(self.argv[-6:])}: exit {self.returncode} after {self.seconds:.1f}s\n"
                f"stdout:\n{self.out[-4000:]}\nstderr:\n{self.err[-6000:]}")


def base_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in _CONTROL_VARS}
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def run_processes(commands, timeout, cwd=None):
    """Runs the commands (argv, env) concurrently; kills every process tree still alive at `timeout`.
    Returns a Finished per command; `timed_out` marks the ones killed."""
    with tempfile.TemporaryDirectory() as tmp:
        procs, files = [], []
        start = time.monotonic()
        for i, (argv, env) in enumerate(commands):
            out = open(os.path.join(tmp, f"{i}.out"), "w+")
            err = open(os.path.join(tmp, f"{i}.err"), "w+")
            files.append((out, err))
            procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=err, cwd=cwd or tmp,
                                          start_new_session=True))
        ended = [None] * len(procs)
        try:
            while any(e is None for e in ended):
                for i, p in enumerate(procs):
                    if ended[i] is None and p.poll() is not None:
                        ended[i] = time.monotonic() - start
                if time.monotonic() - start > timeout:
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for p in procs:
                p.wait()
        results = []
        for i, (p, (out, err)) in enumerate(zip(procs, files)):
            out.seek(0)
            err.seek(0)
            seconds = ended[i] if ended[i] is not None else timeout
            results.append(Finished(commands[i][0], p.returncode if ended[i] is not None else "killed (timeout)",
                                    out.read(), err.read(), seconds))
            out.close()
            err.close()
        return results


def run_ranks(case, world=2, args=(), env=None, timeout=120, per_rank_env=None):
    """Runs tests/dist_cases/<case>.py as `world` ranks (env:// rendezvous on a free port)."""
    port = free_port()
    commands = []
    for rank in range(world):
        e = base_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                      "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)})
        e.update(env or {})
        if per_rank_env:
            e.update(per_rank_env(rank))
        commands.append(([sys.executable, os.path.join(CASES, case + ".py"), *map(str, args)], e))
    return run_processes(commands, timeout)


def check_all(results):
    """Asserts every process exited 0; shows every process's output otherwise."""
    assert all(r.returncode == 0 for r in results), "\n".join(map(repr, results))
    return results

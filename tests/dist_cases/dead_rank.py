"""A rank that crashes or never calls a collective: the others raise DistBackendError within the
timeout, naming the group, the collective, its sequence number and the missing rank."""

import datetime
import os
import sys
import time

import pytest
import torch
import torch.distributed as dist

from common import RANK, data, done, init

mode = sys.argv[1]


def timed_failure(pattern, call):
    start = time.time()
    with pytest.raises(dist.DistBackendError, match=pattern):
        call()
    return time.time() - start


if mode == "crash":
    dev = init(timeout=30)
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [2.0] * 4
    if RANK == 1:
        os._exit(3)  # dies without a word, mid job
    time.sleep(0.5)
    x = data(RANK, torch.float32).to(dev)

    def step():
        dist.all_reduce(x)
        x.cpu()

    elapsed = timed_failure(r"(?s)hccl all_reduce #2 in process group 0 \(default_pg\) failed: .*ranks that did "
                            r"not arrive: 1", step)
    assert elapsed < 30
    print(f"dead-rank error after {elapsed:.2f}s (timeout 30s)", flush=True)
    # A device-wide sync reports it too (from the communication stream).
    with pytest.raises(dist.DistBackendError, match=r"hccl all_reduce #2 .*lost the connection to a peer"):
        torch.npu.synchronize()
    # Later collectives on the group fail at once, with the first failure.
    with pytest.raises(dist.DistBackendError, match=r"unusable after an earlier failure"):
        dist.all_reduce(x)
    done("crash")
    os._exit(0)  # the peer is gone: skip the group's teardown

if mode == "silent":
    dev = init(timeout=60)
    g_short = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=3))
    os.environ["HCCL_EXEC_TIMEOUT"] = "2"
    os.environ["HCCL_BLOCKING_WAIT"] = "1"
    g_exec = dist.new_group([0, 1])  # timeout 60 s, capped by HCCL_EXEC_TIMEOUT
    if RANK == 1:
        time.sleep(9)  # alive, but never calls the collectives
        done("silent")
        os._exit(0)
    x = torch.ones(4, device=dev)

    def step():
        dist.all_reduce(x, group=g_short)
        x.cpu()

    elapsed = timed_failure(r"(?s)hccl all_reduce #1 in process group 1 \(undefined, global ranks \[0, 1\]\) "
                            r"failed: timed out after 3 s; ranks that did not arrive: 1 \(rank 1 was not seen "
                            r"waiting in any collective of this group\)\. Every rank of a group must call", step)
    assert 2.9 < elapsed < 3 + 2, elapsed
    print(f"silent-rank error after {elapsed:.2f}s (timeout 3s)", flush=True)
    work = dist.all_reduce(torch.ones(4, device=dev), group=g_exec, async_op=True)
    elapsed = timed_failure(r"hccl all_reduce #1 in process group 2 .*timed out after 2 s", work.wait)
    assert 1.9 < elapsed < 2 + 2, elapsed
    print(f"HCCL_EXEC_TIMEOUT error after {elapsed:.2f}s, raised by wait() (HCCL_BLOCKING_WAIT=1)", flush=True)
    done("silent")
    os._exit(0)

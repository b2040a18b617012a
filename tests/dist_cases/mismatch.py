"""Ranks that disagree on a collective get a DistBackendError saying how, never a hang or a crash."""

import os
import time

import pytest
import torch
import torch.distributed as dist

import torch_npu.distributed

from common import RANK, close, data, done, init

dev = init(timeout=30)
detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"


def fails(group, pattern, call):
    start = time.time()
    with pytest.raises(Exception, match=pattern) as info:
        out = call(group)
        (out if out is not None else torch.zeros(1, device=dev)).cpu()
    assert time.time() - start < 20, f"took {time.time() - start:.1f}s"
    return info


def recv_into(t, g):
    dist.recv(t, src=0, group=g)
    return t


if detail:
    # torch.distributed's debug wrapper checks every collective's shapes across ranks first.
    g = dist.new_group([0, 1])
    fails(g, r"(?s)mismatch", lambda g: dist.all_reduce(torch.ones(4 + 4 * RANK, device=dev), group=g))
    done("mismatch (TORCH_DISTRIBUTED_DEBUG=DETAIL)")
else:
    g = dist.new_group([0, 1])
    info = fails(g, r"hccl all_reduce #1 in process group 1 .*failed: the ranks passed tensors of different "
                    r"sizes \(rank 0: Float\[4\], rank 1: Float\[2, 4\]\)",
                 lambda g: dist.all_reduce(torch.ones(4 if RANK == 0 else (2, 4), device=dev), group=g))
    assert info.type is dist.DistBackendError, info.type
    fails(g, r"cannot run: process group 1 .* is unusable after an earlier failure.*reinit_process_group",
          lambda g: dist.all_reduce(torch.ones(4, device=dev), group=g))
    # Every rank rebuilds the failed group's links: the same group object works again, its collectives
    # numbered from #1, and a later failure is reported as such.
    assert torch_npu.distributed.reinit_process_group(g) is g
    t = data(RANK, torch.float32).to(dev)
    dist.all_reduce(t, group=g)
    close(t, data(0, torch.float32) + data(1, torch.float32), "all_reduce after reinit_process_group")
    fails(g, r"hccl all_reduce #2 in process group 1 .*failed: the ranks passed tensors of different sizes",
          lambda g: dist.all_reduce(torch.ones(3 if RANK == 0 else 5, device=dev), group=g))
    assert torch_npu.distributed.reinit_process_group(g) is g
    dist.broadcast(t, src=1, group=g)
    close(t, data(0, torch.float32) + data(1, torch.float32), "broadcast after a second reinit")
    assert torch_npu.distributed.reinit_process_group(rebuild_link=False) is None
    fails(dist.new_group([0, 1]), r"different dtypes \(rank 0: Float\[4\], rank 1: Int\[4\]\)",
          lambda g: dist.all_reduce(torch.ones(4, dtype=torch.float32 if RANK == 0 else torch.int32, device=dev),
                                    group=g))
    fails(dist.new_group([0, 1]), r"different collectives \(rank 0: all_reduce, rank 1: broadcast\)",
          lambda g: dist.all_reduce(torch.ones(4, device=dev), group=g) if RANK == 0
          else dist.broadcast(torch.ones(4, device=dev), src=0, group=g))
    fails(dist.new_group([0, 1]), r"different reduce ops \(rank 0: SUM, rank 1: MAX\)",
          lambda g: dist.all_reduce(torch.ones(4, device=dev), op=dist.ReduceOp.SUM if RANK == 0 else
                                    dist.ReduceOp.MAX, group=g))
    fails(dist.new_group([0, 1]), r"different roots \(rank 0: 0, rank 1: 1\)",
          lambda g: dist.broadcast(torch.ones(4, device=dev), src=RANK, group=g))
    fails(dist.new_group([0, 1]), r"rank 0 sends 2 elements to rank 1, which expects 3 from it",
          lambda g: dist.all_to_all_single(torch.ones(4 + RANK, device=dev), torch.ones(4, device=dev),
                                           [2, 2] if RANK == 0 else [3, 2], [2, 2], group=g))
    # Point-to-point: the receiver learns the sender's size before any data moves; the sender's send
    # is never received and fails at its (short) timeout.
    g = dist.new_group([0, 1], timeout=__import__("datetime").timedelta(seconds=3))
    if RANK == 0:
        fails(g, r"hccl send #1 to rank 1 .*failed: rank 1 did not post the matching operation in time",
              lambda g: dist.send(torch.ones(8, device=dev), dst=1, group=g))
    else:
        fails(g, r"hccl recv #1 from rank 0 .*failed: rank 0 sent Float\[8\] \(tag 0\) but this rank's recv "
                 r"expects Float\[4\]", lambda g: recv_into(torch.ones(4, device=dev), g))
    # The default group never failed.
    t = data(RANK, torch.float32).to(dev)
    dist.all_reduce(t)
    close(t, data(0, torch.float32) + data(1, torch.float32), "default group after failures elsewhere")
    done("mismatch")
dist.destroy_process_group()

"""Every collective on npu tensors, each dtype and reduce op, checked against a CPU reference."""

import functools
import operator
import os
import time

import torch
import torch.distributed as dist

from common import RANK, WORLD, close, data, done, init

dev = init()
R = dist.ReduceOp
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int32, torch.int64, torch.uint8, torch.int8]
ALL = FLOATS + INTS + [torch.bool]


def reference(op, dtype, shape=(3, 5), seed=0, factor=None):
    xs = [data(r, dtype, shape, seed) for r in range(WORLD)]
    if dtype == torch.bool:
        fold = {R.SUM: operator.or_, R.MAX: operator.or_, R.BOR: operator.or_, R.PRODUCT: operator.and_,
                R.MIN: operator.and_, R.BAND: operator.and_, R.BXOR: operator.xor}[op]
        return functools.reduce(fold, xs)
    if op in (R.BAND, R.BOR, R.BXOR):
        return functools.reduce({R.BAND: operator.and_, R.BOR: operator.or_, R.BXOR: operator.xor}[op], xs)
    wide = [x.double() if dtype.is_floating_point else x.long() for x in xs]
    if op == R.SUM:
        out = sum(wide)
    elif op == R.PRODUCT:
        out = functools.reduce(operator.mul, wide)
    elif op == R.MIN:
        out = functools.reduce(torch.minimum, wide)
    elif op == R.MAX:
        out = functools.reduce(torch.maximum, wide)
    elif op == R.AVG:
        out = sum(wide) / WORLD if dtype.is_floating_point else torch.div(sum(wide), WORLD, rounding_mode="trunc")
    else:  # premul sum
        out = sum(w * factor for w in wide)
    return out.to(dtype)


def ops_for(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype != torch.bool:
        ops.append(R.AVG)
    if not dtype.is_floating_point:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def all_reduce_every_dtype_and_op():
    for dtype in ALL:
        for op in ops_for(dtype):
            t = data(RANK, dtype).to(dev)
            dist.all_reduce(t, op=op)
            close(t, reference(op, dtype), f"all_reduce {dtype} {op}")
    for dtype in FLOATS:
        t = data(RANK, dtype).to(dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        close(t, reference("premul", dtype, factor=0.5), f"all_reduce {dtype} PREMUL_SUM")
    # Non-contiguous input and output (a transposed view, a slice with a storage offset).
    base = data(RANK, torch.float32, (5, 3)).to(dev)
    view = base.t()
    dist.all_reduce(view)
    close(view, reference(R.SUM, torch.float32, (5, 3)).t(), "all_reduce non-contiguous")
    big = torch.zeros(20, device=dev)
    part = big[3:18]
    part.copy_(data(RANK, torch.float32, (15,)).to(dev))
    dist.all_reduce(part, op=R.MAX)
    close(big[3:18], reference(R.MAX, torch.float32, (15,)), "all_reduce storage offset")
    assert big[:3].abs().sum().item() == 0 and big[18:].abs().sum().item() == 0
    # Complex tensors go as their real view (torch.distributed does that for SUM / AVG).
    c = data(RANK, torch.complex64).to(dev)
    dist.all_reduce(c)
    close(c, sum(data(r, torch.complex64) for r in range(WORLD)), "all_reduce complex64")
    done("all_reduce")


def broadcast_reduce():
    for dtype in ALL + [torch.complex64, torch.int16]:
        for root in range(WORLD):
            t = data(RANK, dtype).to(dev)
            dist.broadcast(t, src=root)
            close(t, data(root, dtype), f"broadcast {dtype} from {root}")
    for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        for op in [R.SUM, R.MAX, R.PRODUCT] + ([R.AVG] if dtype != torch.bool else []):
            for root in range(WORLD):
                t = data(RANK, dtype, (1000,)).to(dev)
                dist.reduce(t, dst=root, op=op)
                expected = reference(op, dtype, (1000,)) if RANK == root else data(RANK, dtype, (1000,))
                close(t, expected, f"reduce {dtype} {op} to {root} (non-roots keep their input)")
    done("broadcast / reduce")


def gathers_and_scatters():
    for dtype in [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool, torch.complex64]:
        inp = data(RANK, dtype).to(dev)
        outs = [torch.empty(3, 5, dtype=dtype, device=dev) for _ in range(WORLD)]
        dist.all_gather(outs, inp)
        for r in range(WORLD):
            close(outs[r], data(r, dtype), f"all_gather {dtype}")
        out = torch.empty(3 * WORLD, 5, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, inp)
        close(out, torch.cat([data(r, dtype) for r in range(WORLD)]), f"all_gather_into_tensor {dtype}")
        for root in range(WORLD):
            gl = [torch.empty(3, 5, dtype=dtype, device=dev) for _ in range(WORLD)] if RANK == root else None
            dist.gather(inp, gather_list=gl, dst=root)
            if RANK == root:
                for r in range(WORLD):
                    close(gl[r], data(r, dtype), f"gather {dtype} to {root}")
            sl = [data(r, dtype, seed=root + 1).to(dev) for r in range(WORLD)] if RANK == root else None
            got = torch.empty(3, 5, dtype=dtype, device=dev)
            dist.scatter(got, scatter_list=sl, src=root)
            close(got, data(RANK, dtype, seed=root + 1), f"scatter {dtype} from {root}")
    # Uneven all_gather: each rank contributes a different number of rows.
    inp = data(RANK, torch.float32, (RANK + 1, 4)).to(dev)
    outs = [torch.empty(r + 1, 4, device=dev) for r in range(WORLD)]
    dist.all_gather(outs, inp)
    for r in range(WORLD):
        close(outs[r], data(r, torch.float32, (r + 1, 4)), "uneven all_gather")
    # Non-contiguous output chunks.
    out = torch.empty(5, 3 * WORLD, device=dev).t()
    dist.all_gather_into_tensor(out, data(RANK, torch.float32).to(dev))
    close(out, torch.cat([data(r, torch.float32) for r in range(WORLD)]), "all_gather_into_tensor non-contiguous")
    done("all_gather / gather / scatter")


def reduce_scatters():
    for dtype in [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]:
        ops = [R.SUM, R.MAX] + ([R.AVG] if dtype != torch.bool else [])
        for op in ops:
            full = [data(r, dtype, (WORLD * 4, 3)) for r in range(WORLD)]
            expected = reference(op, dtype, (WORLD * 4, 3)).chunk(WORLD)[RANK]
            out = torch.empty(4, 3, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, full[RANK].to(dev), op=op)
            close(out, expected, f"reduce_scatter_tensor {dtype} {op}")
            out = torch.empty(4, 3, dtype=dtype, device=dev)
            dist.reduce_scatter(out, [c.to(dev) for c in full[RANK].chunk(WORLD)], op=op)
            close(out, expected, f"reduce_scatter {dtype} {op}")
    for dtype in [torch.float32, torch.bfloat16]:
        inp = data(RANK, dtype, (WORLD * 4, 3)).to(dev)
        keep = inp.clone()
        out = torch.empty(4, 3, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, inp, op=dist._make_nccl_premul_sum(0.25))
        expected = reference("premul", dtype, (WORLD * 4, 3), factor=0.25).chunk(WORLD)[RANK]
        close(out, expected, f"reduce_scatter_tensor {dtype} PREMUL_SUM")
        close(inp, keep.cpu(), "reduce_scatter_tensor leaves its input alone")
    done("reduce_scatter")


def all_to_alls():
    # Even, then uneven splits: rank r sends (r + j + 1) rows to rank j.
    inp = data(RANK, torch.float32, (WORLD * 2, 3)).to(dev)
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    expected = torch.cat([data(r, torch.float32, (WORLD * 2, 3)).chunk(WORLD)[RANK] for r in range(WORLD)])
    close(out, expected, "all_to_all_single even")
    send = [RANK + j + 1 for j in range(WORLD)]
    recv = [r + RANK + 1 for r in range(WORLD)]
    for dtype in [torch.float32, torch.int64, torch.bool]:
        inp = data(RANK, dtype, (sum(send), 2)).to(dev)
        out = torch.empty(sum(recv), 2, dtype=dtype, device=dev)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
        pieces = []
        for r in range(WORLD):
            theirs = [r + j + 1 for j in range(WORLD)]
            pieces.append(data(r, dtype, (sum(theirs), 2)).split(theirs)[RANK])
        close(out, torch.cat(pieces), f"all_to_all_single uneven {dtype}")
        ins = [data(RANK, dtype, (RANK + j + 1, 2), seed=j).to(dev) for j in range(WORLD)]
        outs = [torch.empty(r + RANK + 1, 2, dtype=dtype, device=dev) for r in range(WORLD)]
        dist.all_to_all(outs, ins)
        for r in range(WORLD):
            close(outs[r], data(r, dtype, (r + RANK + 1, 2), seed=RANK), f"all_to_all uneven {dtype}")
    done("all_to_all")


def point_to_point():
    peer = (RANK + 1) % WORLD
    prev = (RANK - 1) % WORLD
    for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        # Both directions at once with isend / irecv, then blocking send / recv ordered by rank.
        got = torch.empty(64, 3, dtype=dtype, device=dev)
        reqs = [dist.isend(data(RANK, dtype, (64, 3)).to(dev), dst=peer), dist.irecv(got, src=prev)]
        for req in reqs:
            req.wait()
        close(got, data(prev, dtype, (64, 3)), f"isend/irecv {dtype}")
        got = torch.empty(5, dtype=dtype, device=dev)
        if RANK == 0:
            dist.send(data(0, dtype, (5,)).to(dev), dst=1)
            dist.recv(got, src=1)
            close(got, data(1, dtype, (5,)), f"send/recv {dtype}")
        elif RANK == 1:
            dist.recv(got, src=0)
            close(got, data(0, dtype, (5,)), f"send/recv {dtype}")
            dist.send(data(1, dtype, (5,)).to(dev), dst=0)
    # A ring with batch_isend_irecv, large enough that Gloo cannot buffer it, into a strided buffer.
    send = data(RANK, torch.float32, (512, 512)).to(dev)
    recv = torch.empty(512, 512, device=dev).t()
    ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, prev)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    close(recv, data(prev, torch.float32, (512, 512)), "batch_isend_irecv ring")
    done("send / recv")


def coalesced_and_barrier():
    ts = [data(RANK, torch.float32, (n,), seed=n).to(dev) for n in (3, 7, 1)]
    from torch.distributed.distributed_c10d import _coalescing_manager

    with _coalescing_manager(device=dev, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for t, n in zip(ts, (3, 7, 1)):
        close(t, reference(R.SUM, torch.float32, (n,), seed=n), "coalesced all_reduce")
    outs = [torch.empty(WORLD * n, device=dev) for n in (2, 5)]
    ins = [data(RANK, torch.float32, (n,), seed=n).to(dev) for n in (2, 5)]
    with _coalescing_manager(device=dev, async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for o, n in zip(outs, (2, 5)):
        close(o, torch.cat([data(r, torch.float32, (n,), seed=n) for r in range(WORLD)]), "coalesced all_gather")
    t = data(RANK, torch.float32, (6,)).to(dev)
    dist.all_reduce_coalesced([t[:2], t[2:]]) if hasattr(dist, "all_reduce_coalesced") else dist.all_reduce(t)
    close(t, reference(R.SUM, torch.float32, (6,)), "all_reduce_coalesced")
    dist.barrier()
    dist.barrier(device_ids=[torch.npu.current_device()])
    done("coalesced / barrier")


def object_collectives():
    objs = [{"rank": RANK, "t": torch.arange(3)}, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs[0]["rank"] == 0 and torch.equal(objs[0]["t"], torch.arange(3))
    gathered = [None] * WORLD
    dist.all_gather_object(gathered, ("hello", RANK, [RANK] * (RANK + 1)))
    assert gathered == [("hello", r, [r] * (r + 1)) for r in range(WORLD)]
    out = [None] * WORLD if RANK == 0 else None
    dist.gather_object({"r": RANK}, out, dst=0)
    if RANK == 0:
        assert out == [{"r": r} for r in range(WORLD)]
    got = [None]
    dist.scatter_object_list(got, [f"to {r}" for r in range(WORLD)] if RANK == 1 else None, src=1)
    assert got[0] == f"to {RANK}"
    done("object collectives")


def async_and_stream_order():
    # The input is still being computed on the stream when the collective is issued.
    a = torch.randn(600, 600, generator=torch.Generator().manual_seed(RANK)).to(dev)
    x = a @ a
    for _ in range(3):
        x = x @ a / 600
    dist.all_reduce(x)
    expected = 0
    for r in range(WORLD):
        ar = torch.randn(600, 600, generator=torch.Generator().manual_seed(r))
        xr = ar @ ar
        for _ in range(3):
            xr = xr @ ar / 600
        expected = expected + xr
    torch.testing.assert_close(x.cpu(), expected, rtol=1e-3, atol=1e-3)
    # Back to back: a collective issued right behind the wait() for the previous one needs no event
    # on the stream, but work queued between the two (a slow matmul feeding the input) is waited for.
    t = torch.ones(64, device=dev)
    side = torch.npu.Stream()
    expected = torch.ones(64)
    for i in range(8):
        if i == 5:
            main = torch.npu.current_stream()
            side.wait_stream(main)
            with torch.npu.stream(side):  # a wait on another stream leaves this one's order alone
                dist.all_reduce(t)
            main.wait_stream(side)
        else:
            dist.all_reduce(t)
        expected = expected * WORLD
        if i % 3 == 1:
            t = (a @ a)[0, :64] * 0 + t * 0.5
            expected = expected * 0.5
    torch.testing.assert_close(t.cpu(), expected)
    # async_op: wait() orders the current stream; the future carries the outputs.
    t = data(RANK, torch.float32).to(dev)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    work.wait()
    close(t, reference(R.SUM, torch.float32), "async all_reduce")
    value = fut.wait()
    assert isinstance(value, list) and value[0] is t or torch.equal(value[0].cpu(), t.cpu())
    deadline = time.time() + 10
    while not work.is_completed():
        assert time.time() < deadline, "is_completed() never became true"
        time.sleep(0.01)
    assert work.is_success() if hasattr(work, "is_success") else True
    chained = dist.all_reduce(data(RANK, torch.float32).to(dev), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    close(chained.wait(), reference(R.SUM, torch.float32) * 2, "future.then")
    # Stream semantics: a synchronous collective returns before a late peer arrives; the result is
    # there once the host syncs.
    if RANK == 1:
        time.sleep(1.0)
    t = data(RANK, torch.float32).to(dev)
    start = time.time()
    dist.all_reduce(t)
    issued = time.time() - start
    close(t, reference(R.SUM, torch.float32), "all_reduce with a late peer")
    synchronous = os.environ.get("TASK_QUEUE_ENABLE") == "0" or os.environ.get("ASCEND_LAUNCH_BLOCKING") == "1"
    if RANK == 0 and not synchronous:
        assert issued < 0.5, f"all_reduce blocked the host for {issued:.2f}s"
    # Lifetime: a tensor freed right after an async collective is not reused before it finishes.
    if RANK == 1:
        time.sleep(0.5)
    x = torch.ones(1 << 16, device=dev)
    work = dist.all_reduce(x, async_op=True)
    del x
    y = torch.full((1 << 16,), 7.0, device=dev)
    work.wait()
    torch.npu.synchronize()
    assert bool((y == 7).all()), "a block still used by a collective was reused"
    done("async / stream order / lifetime")


def groups():
    # A second group over all ranks, then one with rank 1 only, then subgroups of one rank each.
    g = dist.new_group(list(range(WORLD)))
    t = data(RANK, torch.float32).to(dev)
    dist.all_reduce(t, group=g, op=R.MAX)
    close(t, reference(R.MAX, torch.float32), "all_reduce in new_group")
    solo = dist.new_group([WORLD - 1])
    if RANK == WORLD - 1:
        t = data(RANK, torch.float32).to(dev)
        dist.all_reduce(t, group=solo)
        close(t, data(RANK, torch.float32), "all_reduce in a one-rank group")
    # Functional collectives (DTensor / tensor parallel use these): dispatcher ops and wait_tensor.
    import torch.distributed._functional_collectives as funcol

    out = funcol.all_reduce(data(RANK, torch.float32).to(dev), "sum", dist.group.WORLD)
    close(out, reference(R.SUM, torch.float32), "functional all_reduce")
    out = funcol.all_gather_tensor(data(RANK, torch.float32).to(dev), 0, dist.group.WORLD)
    close(out, torch.cat([data(r, torch.float32) for r in range(WORLD)]), "functional all_gather_tensor")
    sub, subs = dist.new_subgroups(group_size=1)
    t = data(RANK, torch.float32).to(dev)
    dist.broadcast(t, src=RANK, group=sub)
    assert len(subs) == WORLD
    assert dist.get_backend(g) == "hccl"
    done("groups")


assert dist.is_hccl_available() and torch.distributed.distributed_c10d.is_hccl_available()
import torch_npu  # noqa: E402

assert torch_npu.distributed.is_hccl_available()
assert dist.get_backend() == "hccl"
for check in [all_reduce_every_dtype_and_op, broadcast_reduce, gathers_and_scatters, reduce_scatters, all_to_alls,
              point_to_point, coalesced_and_barrier, object_collectives, async_and_stream_order, groups]:
    check()
dist.destroy_process_group()
done("all")

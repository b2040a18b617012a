"""Collectives on tensors in private storage formats: the data travels in the base format (TransData on
the way in and, for outputs, back into the tensor's format), so results match a plain CPU reference and
every output keeps its format; a recv into a private-format tensor raises a clear error."""

import pytest
import torch
import torch.distributed as dist
import torch_npu

from common import RANK, WORLD, close, data, done, init

NC1HWC0, FRACTAL_Z, FRACTAL_NZ = 3, 4, 29
dev = init()


def fmt(cpu, acl_format):
    t = torch_npu.npu_format_cast(cpu.to(dev), acl_format)
    assert torch_npu.get_npu_format(t) == acl_format
    return t


def same(actual, expected, acl_format, what):
    assert torch_npu.get_npu_format(actual) == acl_format, f"{what}: format {torch_npu.get_npu_format(actual)}"
    close(actual, expected, what)


shape4 = (2, 20, 3, 3)  # 20 channels: a padded second channel block
for acl_format, shape in [(NC1HWC0, shape4), (FRACTAL_Z, shape4), (FRACTAL_NZ, (5, 17, 18))]:
    for dtype in (torch.float32, torch.float16, torch.int32):
        everyone = [data(r, dtype, shape) for r in range(WORLD)]
        name = f"format {acl_format} {dtype}"

        t = fmt(everyone[RANK], acl_format)
        dist.all_reduce(t)
        same(t, sum(everyone), acl_format, f"all_reduce {name}")

        if dtype.is_floating_point:
            t = fmt(everyone[RANK], acl_format)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            same(t, sum(e.double() for e in everyone).div(WORLD).to(dtype), acl_format, f"all_reduce AVG {name}")

        t = fmt(everyone[RANK] if RANK == 1 else torch.zeros(shape, dtype=dtype), acl_format)
        dist.broadcast(t, src=1)
        same(t, everyone[1], acl_format, f"broadcast {name}")

        # A private-format input into a plain output, and a plain input into private-format outputs.
        out = torch.empty((WORLD * shape[0],) + shape[1:], dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, fmt(everyone[RANK], acl_format))
        close(out, torch.cat(everyone), f"all_gather_into_tensor {name}")
        outs = [fmt(torch.zeros(shape, dtype=dtype), acl_format) for _ in range(WORLD)]
        dist.all_gather(outs, everyone[RANK].to(dev))
        for r in range(WORLD):
            same(outs[r], everyone[r], acl_format, f"all_gather {name} from rank {r}")

t = fmt(data(RANK, torch.float32, (WORLD * 2, 20, 3, 3)), NC1HWC0)
out = fmt(torch.zeros(2, 20, 3, 3), NC1HWC0)
dist.reduce_scatter_tensor(out, t)
expected = sum(data(r, torch.float32, (WORLD * 2, 20, 3, 3)) for r in range(WORLD))
same(out, expected[2 * RANK:2 * RANK + 2], NC1HWC0, "reduce_scatter_tensor NC1HWC0")

# A view of part of a private-format storage: only its elements change.
base = [data(r, torch.float32, shape4) for r in range(WORLD)]
t = fmt(base[RANK], NC1HWC0)
view = t[1, 4:19]
dist.all_reduce(view)
expected = base[RANK].clone()
expected[1, 4:19] = sum(b[1, 4:19] for b in base)
same(t, expected, NC1HWC0, "all_reduce of a view of an NC1HWC0 tensor")

# async_op: wait() orders the caller's stream after the write-back into the private format.
x = torch.full((2, 20, 3, 3), float(RANK + 1), device=dev)
t = torch_npu.npu_format_cast(x * 2, NC1HWC0)  # its input is still being computed on the stream
work = dist.all_reduce(t, async_op=True)
work.wait()
y = t + 1  # runs on the current stream after wait()
close(y, torch.full((2, 20, 3, 3), 2.0 * sum(range(1, WORLD + 1)) + 1), "async all_reduce NC1HWC0")
fut = dist.all_reduce(t, async_op=True).get_future()
(result,) = fut.wait()
same(result, torch.full((2, 20, 3, 3), 2.0 * sum(range(1, WORLD + 1)) * WORLD), NC1HWC0, "future result")

# A send takes a base-format copy; a recv into a private-format tensor says what to do.
payload = data(0, torch.float32, (5, 17, 18))
if RANK == 0:
    dist.send(fmt(payload, FRACTAL_NZ), dst=1)
else:
    got = torch.empty(5, 17, 18, device=dev)
    dist.recv(got, src=0)
    close(got, payload, "send FRACTAL_NZ")
    with pytest.raises(ValueError, match=r"recv: the tensor is stored in the private format FRACTAL_NZ; receive "
                                         r"into a base-format tensor .*npu_format_cast\(t, 29\)"):
        dist.recv(fmt(torch.zeros(5, 17, 18), FRACTAL_NZ), src=0)

dist.barrier()
dist.destroy_process_group()
done("formats")

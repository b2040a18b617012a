"""Shared by the distributed test cases: rank setup and deterministic per-rank data, so every rank can
compute every collective's expected result on the CPU by itself."""

import datetime
import os

import torch
import torch.distributed as dist

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))


def init(backend="hccl", timeout=60, **kwargs):
    torch.npu.set_device(LOCAL_RANK)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout), **kwargs)
    return torch.device("npu", LOCAL_RANK)


def data(rank, dtype, shape=(3, 5), seed=0):
    """Rank `rank`'s input: small values, so that products and sums stay exact."""
    g = torch.Generator().manual_seed(7919 * seed + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randint(-8, 9, shape, generator=g).double() / 4).to(dtype)
    if dtype.is_complex:
        return torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, shape, generator=g).to(dtype)


def close(actual, expected, what):
    actual = actual.cpu()
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(actual, expected), f"{what}:\n{actual}\n!=\n{expected}"


def done(name):
    print(f"ok {name}", flush=True)

"""The ways to start an hccl job: env:// (torchrun, or MASTER_ADDR / MASTER_PORT as the seeds set
them), tcp://, init_process_group(device_id=...), backend=None, "cpu:gloo,npu:hccl" and
init_device_mesh("npu", ...); then a few DDP steps checked against single-process training."""

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import done

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", RANK))
modes = sys.argv[1].split(",")
ports = sys.argv[2].split(",") if len(sys.argv) > 2 else []


def sums_to(t, expected):
    dist.all_reduce(t)
    assert t.cpu().tolist() == [expected] * t.numel(), t.cpu()


def ddp_steps():
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    model = DDP(copy.deepcopy(base).to(f"npu:{LOCAL_RANK}"), device_ids=[LOCAL_RANK])
    ref = copy.deepcopy(base).double()
    opt, ropt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(5)
    for _ in range(4):
        x, y = torch.randn(4 * WORLD, 6, generator=g), torch.randint(0, 3, (4 * WORLD,), generator=g)
        opt.zero_grad()
        ropt.zero_grad()
        mine = slice(RANK * 4, RANK * 4 + 4)
        nn.functional.cross_entropy(model(x[mine].npu()), y[mine].npu()).backward()
        nn.functional.cross_entropy(ref(x.double()), y).backward()
        opt.step()
        ropt.step()
    for p, q in zip(model.module.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu().double(), q.detach(), rtol=1e-5, atol=1e-5)
    done(f"ddp steps on rank {RANK} of {WORLD} (local rank {LOCAL_RANK})")


for i, mode in enumerate(modes):
    if i < len(ports):
        os.environ["MASTER_PORT"] = ports[i]
    dev = torch.device("npu", LOCAL_RANK)
    if mode == "env":  # the seeds' form: backend and ranks, rendezvous from MASTER_ADDR / MASTER_PORT
        torch.npu.set_device(LOCAL_RANK)
        dist.init_process_group(backend="hccl", world_size=WORLD, rank=RANK)
    elif mode == "tcp":
        torch.npu.set_device(LOCAL_RANK)
        dist.init_process_group("hccl", init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                                world_size=WORLD, rank=RANK)
    elif mode == "device_id":
        dist.init_process_group(device_id=dev)
        assert dist.get_backend() == "hccl"
    elif mode == "none":
        torch.npu.set_device(LOCAL_RANK)
        dist.init_process_group()  # the accelerator's default backend
    elif mode == "mixed":
        torch.npu.set_device(LOCAL_RANK)
        dist.init_process_group("cpu:gloo,npu:hccl")
        sums_to(torch.ones(3), float(WORLD))  # on Gloo
        objs = [None] * WORLD
        dist.all_gather_object(objs, RANK)
        assert objs == list(range(WORLD))
    elif mode == "mesh":
        torch.npu.set_device(LOCAL_RANK)
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("npu", (WORLD,))
        assert mesh.device_type == "npu"
        sums_to(torch.ones(2, device=dev), float(WORLD))
        t = torch.full((2,), float(RANK), device=dev)
        dist.all_reduce(t, group=mesh.get_group())
        assert t.cpu().tolist() == [float(sum(range(WORLD)))] * 2
    else:
        raise SystemExit(f"unknown mode {mode}")
    import torch_npu

    assert isinstance(dist.group.WORLD._get_backend(dev), torch_npu.distributed.ProcessGroupHCCL)
    sums_to(torch.ones(4, device=dev), float(WORLD))
    ddp_steps()
    dist.destroy_process_group()
    done(mode)

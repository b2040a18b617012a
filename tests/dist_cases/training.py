"""DDP (buckets, find_unused_parameters, no_sync, fp16 / bf16 compression hooks), FSDP2 fully_shard
(with and without MixedPrecisionPolicy) and ZeroRedundancyOptimizer on npu: each gives the same
parameters as single-process training on the global batch."""

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from common import RANK, WORLD, done, init

dev = init()
GLOBAL_BATCH = 8
LOCAL = GLOBAL_BATCH // WORLD


class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)
        self.unused = nn.Linear(8, 4) if unused_branch else None

    def forward(self, x):
        x = torch.relu(self.conv(x))
        x = torch.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3)))


def batches(steps, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(GLOBAL_BATCH, 3, 8, 8, generator=g), torch.randint(0, 4, (GLOBAL_BATCH,), generator=g))
            for _ in range(steps)]


def fresh(unused_branch=False):
    torch.manual_seed(1234)
    return Net(unused_branch)


def reference(model, data, make_opt, micro=1):
    """Single-process training on the global batch (CPU, float64)."""
    model = copy.deepcopy(model).double()
    opt = make_opt(model.parameters())
    for x, y in data:
        opt.zero_grad()
        for xm, ym in zip(x.double().chunk(micro), y.chunk(micro)):
            nn.functional.cross_entropy(model(xm), ym).backward()
        opt.step()
    return model


def local(x):
    return x[RANK * LOCAL:(RANK + 1) * LOCAL]


def check(trained, ref, what, tol=1e-5):
    worst = 0.0
    for (name, p), q in zip(trained.named_parameters(), ref.parameters()):
        full = (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu().double()
        torch.testing.assert_close(full, q.detach(), rtol=tol, atol=tol, msg=lambda m: f"{what}: {name}: {m}")
        worst = max(worst, (full - q.detach()).abs().max().item())
    if RANK == 0:
        print(f"parity {what}: max |param - single-process reference| = {worst:.2e}", flush=True)


def sgd(params):
    return torch.optim.SGD(params, lr=0.5, momentum=0.9)


def ddp_runs():
    data = batches(3)
    for what, kwargs, hook, tol in [
        ("ddp (several buckets)", {"bucket_cap_mb": 0.001}, None, 1e-5),
        ("ddp fp16 compression hook", {}, default_hooks.fp16_compress_hook, 5e-3),
        ("ddp bf16 compression hook", {}, default_hooks.bf16_compress_hook, 3e-2),
    ]:
        base = fresh()
        model = DDP(copy.deepcopy(base).to(dev), device_ids=[dev.index], **kwargs)
        if hook is not None:
            model.register_comm_hook(None, hook)
        opt = sgd(model.parameters())
        for x, y in data:
            opt.zero_grad()
            nn.functional.cross_entropy(model(local(x).to(dev)), local(y).to(dev)).backward()
            opt.step()
        check(model.module, reference(base, data, sgd), what, tol)
    # find_unused_parameters with a branch that never runs.
    base = fresh(unused_branch=True)
    model = DDP(copy.deepcopy(base).to(dev), device_ids=[dev.index], find_unused_parameters=True)
    opt = sgd(model.parameters())
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(local(x).to(dev)), local(y).to(dev)).backward()
        opt.step()
    check(model.module, reference(base, data, sgd), "ddp find_unused_parameters")
    # no_sync: two micro-batches per step, gradients reduced once.
    base = fresh()
    model = DDP(copy.deepcopy(base).to(dev), device_ids=[dev.index])
    opt = sgd(model.parameters())
    for x, y in data:
        opt.zero_grad()
        xs, ys = local(x).chunk(2), local(y).chunk(2)
        with model.no_sync():
            (nn.functional.cross_entropy(model(xs[0].to(dev)), ys[0].to(dev)) / 2).backward()
        (nn.functional.cross_entropy(model(xs[1].to(dev)), ys[1].to(dev)) / 2).backward()
        opt.step()

    def ref_no_sync():
        ref = copy.deepcopy(base).double()
        ropt = sgd(ref.parameters())
        for x, y in data:
            ropt.zero_grad()
            for half in range(2):
                loss = 0
                for r in range(WORLD):
                    xr = x[r * LOCAL:(r + 1) * LOCAL].double().chunk(2)[half]
                    yr = y[r * LOCAL:(r + 1) * LOCAL].chunk(2)[half]
                    loss = loss + nn.functional.cross_entropy(ref(xr), yr) / 2 / WORLD
                loss.backward()
            ropt.step()
        return ref

    check(model.module, ref_no_sync(), "ddp no_sync")
    done("ddp")


def fsdp2_runs():
    mesh = init_device_mesh("npu", (WORLD,))
    data = batches(3, seed=1)

    # SGD: updates proportional to the gradients, so bf16 compute shows as bf16-sized differences.
    for what, mp, tol in [("fsdp2", None, 1e-5),
                          ("fsdp2 MixedPrecisionPolicy(bf16 params, fp32 reduce)",
                           MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32), 5e-3)]:
        base = fresh()
        model = copy.deepcopy(base).to(dev)
        kwargs = {"mesh": mesh} if mp is None else {"mesh": mesh, "mp_policy": mp}
        fully_shard(model.conv, **kwargs)
        fully_shard(model.conv2, **kwargs)
        fully_shard(model, **kwargs)
        opt = sgd(model.parameters())
        for x, y in data:
            opt.zero_grad()
            out = model(local(x).to(dev))
            nn.functional.cross_entropy(out.float(), local(y).to(dev)).backward()
            opt.step()
        check(model, reference(base, data, sgd), what, tol)
    done("fsdp2")


def zero_runs():
    data = batches(3, seed=2)
    base = fresh()
    model = DDP(copy.deepcopy(base).to(dev), device_ids=[dev.index])
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    for x, y in data:
        opt.zero_grad()
        nn.functional.cross_entropy(model(local(x).to(dev)), local(y).to(dev)).backward()
        opt.step()
    check(model.module, reference(base, data, lambda p: torch.optim.Adam(p, lr=0.01)), "ZeroRedundancyOptimizer",
          1e-4)
    opt.consolidate_state_dict(to=0)
    if RANK == 0:
        assert len(opt.state_dict()["state"]) == len(list(model.parameters()))
    done("zero")


ddp_runs()
fsdp2_runs()
zero_runs()
dist.destroy_process_group()
done("all")

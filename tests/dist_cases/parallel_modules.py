"""torch_npu.distributed's parallelism modules on 2 ranks against single-process CPU references:
DTensor rules for npu ops (forward and backward of npu_rms_norm on a sharded batch), FSDP2 training
with torch_npu.distributed.fsdp.fully_shard, and a 2-stage pipeline from
torch_npu.distributed.pipelining.pipeline (FX tracing with an atomic unit) run by GPipe over hccl."""

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import ScheduleGPipe, SplitPoint
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

import torch_npu
from torch_npu.distributed.fsdp import fully_shard
from torch_npu.distributed.pipelining import pipeline
from common import RANK, WORLD, done, init

dev = init(device_id=torch.device("npu", RANK))
mesh = init_device_mesh("npu", (WORLD,))

# --- DTensor: npu_rms_norm over a batch sharded by rows, with its backward.
torch.manual_seed(0)
x, gamma = torch.randn(6, 5, 8), torch.randn(8)
dx = distribute_tensor(x.to(dev), mesh, [Shard(0)]).requires_grad_()
dg = distribute_tensor(gamma.to(dev), mesh, [Replicate()]).requires_grad_()
y, rstd = torch_npu.npu_rms_norm(dx, dg)
assert y.placements == (Shard(0),) and rstd.placements == (Shard(0),), (y.placements, rstd.placements)
(y * y).sum().backward()
xc, gc = x.clone().requires_grad_(), gamma.clone().requires_grad_()
ref = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-6) * gc
(ref * ref).sum().backward()
torch.testing.assert_close(y.full_tensor().cpu(), ref.detach(), rtol=1e-4, atol=1e-4)
torch.testing.assert_close(dx.grad.full_tensor().cpu(), xc.grad, rtol=1e-3, atol=1e-3)
torch.testing.assert_close(dg.grad.full_tensor().cpu(), gc.grad, rtol=1e-3, atol=1e-3)
done("dtensor npu ops")

# --- FSDP2: 3 SGD steps on each rank's half of the batch == 3 steps on the whole batch.
torch.manual_seed(1)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
reference = copy.deepcopy(model)
batches = [(torch.randn(8, 8), torch.randn(8, 4)) for _ in range(3)]
sharded = copy.deepcopy(model).to(dev)
for layer in (sharded[0], sharded[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(sharded, mesh=mesh)
opt = torch.optim.SGD(sharded.parameters(), lr=0.1)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
half = slice(4 * RANK, 4 * RANK + 4)
for inp, target in batches:
    opt.zero_grad()
    nn.functional.mse_loss(sharded(inp[half].to(dev)), target[half].to(dev)).backward()
    opt.step()
    ref_opt.zero_grad()
    nn.functional.mse_loss(reference(inp), target).backward()
    ref_opt.step()
for (name, p), q in zip(sharded.named_parameters(), reference.parameters()):
    torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
done("fsdp fully_shard")


# --- Pipeline: stage r on rank r, two microbatches, GPipe; the losses match the whole model's.
class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


torch.manual_seed(2)
stack = Stack()
inp, target = torch.randn(4, 6), torch.randn(4, 6)
pipe = pipeline(copy.deepcopy(stack), (inp[:2],), split_spec={"layers.2": SplitPoint.BEGINNING}, mode="fx",
                atomic_units=["layers.0"])
assert pipe.num_stages == 2, pipe.num_stages
stage = pipe.build_stage(RANK, dev)
schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=nn.functional.mse_loss)
losses = []
if RANK == 0:
    schedule.step(inp.to(dev))
else:
    out = schedule.step(target=target.to(dev), losses=losses)
    expected = [nn.functional.mse_loss(stack(inp[i:i + 2]), target[i:i + 2]) for i in (0, 2)]
    torch.testing.assert_close(torch.stack(losses).cpu(), torch.stack(expected).detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.cpu(), stack(inp).detach(), rtol=1e-4, atol=1e-5)
done("pipelining fx")
dist.destroy_process_group()

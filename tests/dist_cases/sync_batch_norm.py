"""torch_npu.utils.syncbatchnorm.SyncBatchNorm over 2 ranks against batch norm of the whole batch on the
CPU (outputs, running statistics, gradients), and stress_detect("hccs") over the group."""

import torch
import torch.distributed as dist

from torch_npu.utils.syncbatchnorm import SyncBatchNorm
from common import LOCAL_RANK, RANK, WORLD, close, data, done, init

dev = init(device_id=torch.device("npu", LOCAL_RANK))
batches = [data(r, torch.float32, shape=(3, 4, 5, 5)) for r in range(WORLD)]
weight, bias = data(100, torch.float32, shape=(4,)) + 2, data(101, torch.float32, shape=(4,))

x = batches[RANK].to(dev).requires_grad_(True)
w, b = weight.to(dev).requires_grad_(True), bias.to(dev).requires_grad_(True)
running_mean, running_var = torch.zeros(4, device=dev), torch.ones(4, device=dev)
y = SyncBatchNorm.apply(x, w, b, running_mean, running_var, 1e-5, 0.1, dist.group.WORLD, WORLD)
grad = data(200 + RANK, torch.float32, shape=y.shape)
y.backward(grad.to(dev))

whole = torch.cat(batches).requires_grad_(True)
wc, bc = weight.clone().requires_grad_(True), bias.clone().requires_grad_(True)
rm, rv = torch.zeros(4), torch.ones(4)
yc = torch.nn.functional.batch_norm(whole, rm, rv, wc, bc, training=True, momentum=0.1, eps=1e-5)
yc.backward(torch.cat([data(200 + r, torch.float32, shape=y.shape) for r in range(WORLD)]))
rows = slice(3 * RANK, 3 * RANK + 3)
close(y.detach(), yc.detach()[rows], "sync batch norm output")
close(running_mean, rm, "sync batch norm running mean")
close(running_var, rv, "sync batch norm running var")
close(x.grad, whole.grad[rows], "sync batch norm input grad")
# Weight and bias gradients are each rank's share (DDP sums them): summed, the whole batch's.
dist.all_reduce(w.grad)
dist.all_reduce(b.grad)
close(w.grad, wc.grad, "sync batch norm weight grad")
close(b.grad, bc.grad, "sync batch norm bias grad")
assert torch.npu.stress_detect("hccs") == 0
done("sync batch norm")
dist.destroy_process_group()

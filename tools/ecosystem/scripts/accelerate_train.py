"""accelerate on npu, launched as users launch it (`accelerate launch --num_processes 2
accelerate_train.py`): Accelerator() picks npu and hccl, prepare() shards the data, gradients are
averaged; rank 0 compares the final weights with full-batch training on CPU. One JSON line."""

import json
import sys

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

STEPS, BATCH = 6, 8


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def main():
    accelerator = Accelerator()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(STEPS * BATCH, 16, generator=g), torch.randn(STEPS * BATCH, 1, generator=g)
    per_rank = BATCH // accelerator.num_processes
    loader = DataLoader(TensorDataset(x, y), batch_size=per_rank, shuffle=False)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for xb, yb in loader:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
    params = torch.cat([p.detach().flatten().cpu() for p in accelerator.unwrap_model(model).parameters()])
    if accelerator.is_main_process:
        ref = make_model()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for i in range(STEPS):
            loss = torch.nn.functional.mse_loss(ref(x[i * BATCH:(i + 1) * BATCH]), y[i * BATCH:(i + 1) * BATCH])
            ref_opt.zero_grad()
            loss.backward()
            ref_opt.step()
        ref_params = torch.cat([p.detach().flatten() for p in ref.parameters()])
        err = (params - ref_params).abs().max().item()
        result = {"device": str(accelerator.device), "num_processes": accelerator.num_processes,
                  "distributed_type": str(accelerator.distributed_type), "max_abs_err": err,
                  "ok": str(accelerator.device).startswith("npu") and err < 1e-5}
        print(json.dumps(result))
        sys.stdout.flush()
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()

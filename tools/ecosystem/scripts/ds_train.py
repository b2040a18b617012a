"""DeepSpeed ZeRO training on npu, launched as users launch it (`deepspeed --num_gpus 2 ds_train.py
--stage 2`): DeepSpeed's FusedAdam, bf16 or fp32, then rank 0 compares the loss curve and the final
weights with the same training on CPU (torch.optim.Adam on the whole batch)."""

import argparse
import json
import os

import deepspeed
import torch

STEPS, BATCH, DIM = 8, 16, 32


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(DIM, 64), torch.nn.GELU(), torch.nn.Linear(64, DIM))


def data():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, DIM, generator=g), torch.randn(BATCH, DIM, generator=g)) for _ in range(STEPS)]


def cpu_reference(lr):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses = []
    for x, y in data():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stage", type=int, default=2)
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--out", default="ds_result.json")
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    lr = 1e-2
    config = {
        "train_micro_batch_size_per_gpu": BATCH // 2,
        "gradient_accumulation_steps": 1,
        "optimizer": {"type": "Adam", "params": {"lr": lr, "betas": [0.9, 0.999], "eps": 1e-8,
                                                  "weight_decay": 0.0, "torch_adam": False}},
        "zero_optimization": {"stage": args.stage},
        "bf16": {"enabled": args.dtype == "bf16"},
        "steps_per_print": 1000,
    }
    deepspeed.init_distributed(dist_backend="hccl")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    engine, optimizer, _, _ = deepspeed.initialize(model=make_model(), model_parameters=None, config=config)
    engine_opt = type(optimizer.optimizer if hasattr(optimizer, "optimizer") else optimizer).__name__
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    losses = []
    for x, y in data():
        shard = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        xs, ys = x[shard].to(engine.device, dtype), y[shard].to(engine.device, dtype)
        loss = torch.nn.functional.mse_loss(engine(xs).float(), ys.float())
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        torch.distributed.all_reduce(mean)
        losses.append(mean.item() / world)
    # The fp32 master weights (collective under ZeRO-3: every rank asks).
    from deepspeed.utils import safe_get_full_fp32_param

    full = [safe_get_full_fp32_param(p) for p in engine.module.parameters()]
    params = torch.cat([(f if f is not None else p).detach().float().flatten().cpu()
                        for f, p in zip(full, engine.module.parameters())])
    if rank == 0:
        ref_losses, ref_params = cpu_reference(lr)
        tol = 5e-2 if args.dtype == "bf16" else 1e-4
        loss_err = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(losses, ref_losses))
        param_err = ((params - ref_params).abs().max() / ref_params.abs().max()).item()
        result = {"stage": args.stage, "dtype": args.dtype, "device": str(engine.device), "world": world,
                  "optimizer": engine_opt, "losses": losses, "cpu_losses": ref_losses,
                  "max_loss_rel_err": loss_err, "max_param_rel_err": param_err,
                  "ok": loss_err < tol and param_err < (0.15 if args.dtype == "bf16" else 1e-4) and losses[-1] < losses[0]}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))
    torch.distributed.barrier()


if __name__ == "__main__":
    main()

"""ImageNet-style trainer (pytorch/examples imagenet/main.py, migrated to npu as seed 003 describes):
--device npu|cpu, apex-style mixed precision (--amp --opt-level --loss-scale), fused SGD, checkpoint
save/resume, a pinned-memory DataLoader feeding the device with non_blocking copies, and the
multi-device path: one process per device of --device-list, DistributedDataParallel over hccl.

    python examples/imagenet/main.py --arch resnet_tiny --epochs 1 --steps-per-epoch 20 --amp --opt-level O2
    python examples/imagenet/main.py --multiprocessing-distributed --device-list 0,1 --dist-backend hccl \
        --world-size 1 --rank 0 --addr 127.0.0.1 --arch resnet_tiny --epochs 1
"""

import argparse
import os
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import SyntheticImages  # noqa: E402
from models import build_model  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # progress bars are optional
    tqdm = None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="ImageNet-style training on npu or cpu")
    p.add_argument("-a", "--arch", default="resnet_tiny",
                   help="resnet_tiny | resnet18 | resnet50 | shufflenet_v2_tiny | shufflenet_v2_x1_0")
    p.add_argument("--shuffle-impl", default="transpose", choices=["transpose", "index_select", "fused"],
                   help="ShuffleNetV2 channel shuffle: original, seed 003's index_select rewrite, or fused cat+shuffle")
    p.add_argument("--epochs", default=1, type=int)
    p.add_argument("--start-epoch", default=0, type=int)
    p.add_argument("--steps-per-epoch", default=0, type=int, help="stop an epoch after this many steps (0: all)")
    p.add_argument("-b", "--batch-size", default=32, type=int)
    p.add_argument("--lr", "--learning-rate", default=0.05, type=float, dest="lr")
    p.add_argument("--momentum", default=0.9, type=float)
    p.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    p.add_argument("-p", "--print-freq", default=1, type=int, help="print the loss every N steps (0: never)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--resume", default="", type=str, help="checkpoint to resume from")
    p.add_argument("--checkpoint-dir", default="", type=str, help="save checkpoints here after each epoch")
    p.add_argument("-e", "--evaluate", action="store_true", help="only evaluate on the validation set")
    p.add_argument("--seed", default=0, type=int)
    p.add_argument("-j", "--workers", default=0, type=int)
    p.add_argument("--train-size", default=1024, type=int)
    p.add_argument("--val-size", default=256, type=int)
    p.add_argument("--image-size", default=32, type=int)
    p.add_argument("--num-classes", default=10, type=int)
    # npu migration arguments (seed 003)
    p.add_argument("--device", default="npu", choices=["npu", "cpu"])
    p.add_argument("--device-id", default=0, type=int)
    p.add_argument("--amp", action="store_true", help="apex-style mixed precision (torch_npu.contrib.amp)")
    p.add_argument("--opt-level", default="O2", type=str)
    p.add_argument("--loss-scale", default=1024.0, type=float, help="static loss scale; -1 means dynamic")
    p.add_argument("--amp-dtype", default="float16", choices=["float16", "bfloat16"],
                   help="low precision type of --amp (bfloat16 convolutions are much faster on the software NPU)")
    p.add_argument("--combine-grad", action="store_true", help="keep gradients in one combined buffer")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "npu_fused_sgd"])
    # multi-device training (seed 003): one process per device of --device-list
    p.add_argument("--addr", default="127.0.0.1", type=str, help="master address (MASTER_ADDR)")
    p.add_argument("--port", default="29688", type=str, help="master port (MASTER_PORT)")
    p.add_argument("--device-list", default="0", type=str, help="device ids of this node, e.g. 0,1,2,3")
    p.add_argument("--dist-backend", default="hccl", type=str)
    p.add_argument("--dist-url", default="env://", type=str, help="unused on npu: the rendezvous is MASTER_ADDR/PORT")
    p.add_argument("--world-size", default=-1, type=int, help="number of nodes (of processes without --mp...)")
    p.add_argument("--rank", default=-1, type=int, help="node rank (process rank without --mp...)")
    p.add_argument("--multiprocessing-distributed", action="store_true",
                   help="spawn one process per device of --device-list and train with DistributedDataParallel")
    return p.parse_args(argv)


def device_id_to_process_device_map(device_list):
    """Process index -> device id, for the devices of --device-list (seed 003)."""
    devices = sorted(int(x) for x in device_list.split(","))
    return dict(enumerate(devices))


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def accuracy(output, target):
    return (output.argmax(1) == target).float().mean().item() * 100.0


def _progress(iterable, total, desc, enabled):
    if tqdm is None or not enabled:
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


def _log(args, text):
    (tqdm.write if tqdm is not None and not args.no_progress else print)(text)


def train(loader, model, criterion, optimizer, epoch, loc, args, amp, history):
    model.train()
    losses, acc = AverageMeter(), AverageMeter()
    steps = len(loader) if args.steps_per_epoch <= 0 else min(len(loader), args.steps_per_epoch)
    timed_images, timed_seconds = 0, 0.0
    end = time.perf_counter()
    bar = _progress(loader, steps, f"epoch {epoch}", not args.no_progress)
    for i, (images, target) in enumerate(bar):
        if i >= steps:
            break
        images = images.to(loc, non_blocking=True)
        target = target.to(loc, non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        if args.amp:
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        optimizer.step()
        loss_value = loss.item()  # synchronises with the device, so the step time below is real
        now = time.perf_counter()
        if i > 0:  # the first step includes one-time setup; leave it out of the throughput
            timed_images += images.shape[0]
            timed_seconds += now - end
        end = now
        losses.update(loss_value, images.shape[0])
        acc.update(accuracy(output.detach(), target), images.shape[0])
        history["losses"].append(loss_value)
        if args.print_freq and i % args.print_freq == 0:
            rate = timed_images / timed_seconds if timed_seconds else float("nan")
            _log(args, f"Epoch [{epoch}][{i:>3}/{steps}] loss {loss_value:.4f} acc@1 {acc.avg:6.2f} "
                       f"{rate:8.1f} img/s")
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{loss_value:.4f}")
    history["timed_images"] += timed_images
    history["timed_seconds"] += timed_seconds
    return losses.avg


def validate(loader, model, criterion, loc, args):
    model.eval()
    losses, acc = AverageMeter(), AverageMeter()
    with torch.no_grad():
        for images, target in _progress(loader, len(loader), "validate", not args.no_progress):
            images, target = images.to(loc, non_blocking=True), target.to(loc, non_blocking=True)
            output = model(images)
            losses.update(criterion(output, target).item(), images.shape[0])
            acc.update(accuracy(output, target), images.shape[0])
    _log(args, f" * val loss {losses.avg:.4f} acc@1 {acc.avg:.2f}")
    return acc.avg


def save_checkpoint(state, is_best, directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "checkpoint.pth.tar")
    torch.save(state, path)
    if is_best:
        shutil.copyfile(path, os.path.join(directory, "model_best.pth.tar"))
    return path


def run(argv=None):
    """Train as the command line says; returns {"losses", "images_per_sec", "best_acc1", "checkpoint"}
    (with --multiprocessing-distributed the processes it spawns print their results)."""
    args = parse_args(argv)
    if args.world_size == -1 and "WORLD_SIZE" in os.environ:  # started by torchrun
        args.world_size = int(os.environ["WORLD_SIZE"])
    args.distributed = args.world_size > 1 or args.multiprocessing_distributed
    if args.multiprocessing_distributed:
        os.environ["MASTER_ADDR"] = args.addr
        os.environ["MASTER_PORT"] = args.port
    args.process_device_map = device_id_to_process_device_map(args.device_list)
    ngpus_per_node = len(args.process_device_map) if args.device == "npu" else 1
    if args.multiprocessing_distributed:
        # world size: processes in all nodes; each spawned process gets its device from the map
        args.world_size = ngpus_per_node * max(args.world_size, 1)
        mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))
        return None
    return main_worker(None, ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    if args.distributed:
        if args.multiprocessing_distributed:
            # the global rank among all processes
            args.rank = max(args.rank, 0) * ngpus_per_node + gpu
        else:  # one process per device started by a launcher (torchrun sets RANK and LOCAL_RANK)
            gpu = int(os.environ.get("LOCAL_RANK", 0))
            args.rank = int(os.environ["RANK"]) if args.rank == -1 else args.rank
            ngpus_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", ngpus_per_node))
        args.device_id = args.process_device_map.get(gpu, gpu)
        # the rendezvous comes from MASTER_ADDR / MASTER_PORT (no init_method on npu, as the seed does)
        dist.init_process_group(backend=args.dist_backend, world_size=args.world_size, rank=args.rank)
        # each process trains on its share of the global batch
        args.batch_size = args.batch_size // ngpus_per_node
        args.workers = (args.workers + ngpus_per_node - 1) // ngpus_per_node
    if args.device == "npu":
        import torch_npu  # noqa: F401  (also loaded by `import torch`)

        loc = f"npu:{args.device_id}"
        torch.npu.set_device(loc)
    else:
        loc = "cpu"
    torch.manual_seed(args.seed)  # the model is built on the CPU: the same weights for every device
    model = build_model(args.arch, args.num_classes, args.shuffle_impl).to(loc)
    criterion = nn.CrossEntropyLoss().to(loc)
    if args.optimizer == "npu_fused_sgd":
        from torch_npu.optim import NpuFusedSGD

        optimizer = NpuFusedSGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    else:
        optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                    weight_decay=args.weight_decay)
    amp = None
    if args.amp:
        from torch_npu.contrib import amp

        model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level, loss_scale=args.loss_scale,
                                          combine_grad=args.combine_grad, dtype=getattr(torch, args.amp_dtype))
    best_acc1 = 0.0
    if args.resume:
        if not os.path.isfile(args.resume):
            raise SystemExit(f"=> no checkpoint found at '{args.resume}'")
        checkpoint = torch.load(args.resume, map_location=loc)
        args.start_epoch = checkpoint["epoch"]
        best_acc1 = checkpoint["best_acc1"]
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        if args.amp and "amp" in checkpoint:
            amp.load_state_dict(checkpoint["amp"])
        print(f"=> loaded checkpoint '{args.resume}' (epoch {checkpoint['epoch']})")
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.device_id] if loc != "cpu" else None)

    pin = args.device == "npu"  # pinned host memory makes the non_blocking copies asynchronous
    train_set = SyntheticImages(args.train_size, args.num_classes, args.image_size, seed=args.seed)
    val_set = SyntheticImages(args.val_size, args.num_classes, args.image_size, seed=args.seed + 1)
    # each process reads its own part of the data; drop_last keeps every step's shapes fixed
    train_sampler = DistributedSampler(train_set, seed=args.seed, drop_last=True) if args.distributed else None
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=train_sampler is None, drop_last=True,
                              num_workers=args.workers, pin_memory=pin, sampler=train_sampler,
                              generator=torch.Generator().manual_seed(args.seed))
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.workers, pin_memory=pin,
                            drop_last=args.distributed)
    main_process = not args.distributed or args.rank % ngpus_per_node == 0

    history = {"losses": [], "timed_images": 0, "timed_seconds": 0.0}
    checkpoint_path = None
    if args.evaluate:
        best_acc1 = validate(val_loader, model, criterion, loc, args)
    for epoch in range(args.start_epoch, args.epochs if not args.evaluate else args.start_epoch):
        if train_sampler is not None:
            train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, epoch, loc, args, amp, history)
        acc1 = validate(val_loader, model, criterion, loc, args)
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        if args.checkpoint_dir and main_process:
            state = {"epoch": epoch + 1, "arch": args.arch, "state_dict": model.state_dict(),
                     "best_acc1": best_acc1, "optimizer": optimizer.state_dict()}
            if args.amp:
                state["amp"] = amp.state_dict()
            checkpoint_path = save_checkpoint(state, is_best, args.checkpoint_dir)
    rate = history["timed_images"] / history["timed_seconds"] if history["timed_seconds"] else float("nan")
    if history["losses"] and main_process:
        print(f"trained {len(history['losses'])} steps on {loc}: {rate:.1f} images/s, best acc@1 {best_acc1:.2f}")
    if args.distributed:
        # DDP keeps the replicas identical: every process reports the same parameter checksum
        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        print(f"rank {args.rank}/{args.world_size} on {loc}: final loss {history['losses'][-1]:.4f} "
              f"parameter checksum {checksum:.10e}", flush=True)
        dist.destroy_process_group()
    return {"losses": history["losses"], "images_per_sec": rate, "best_acc1": best_acc1,
            "checkpoint": checkpoint_path}


if __name__ == "__main__":
    run()

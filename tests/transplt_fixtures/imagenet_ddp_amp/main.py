"""A CUDA training script in the shape of pytorch/examples' ImageNet main.py (test fixture for the script
converter and transfer_to_npu): a small CNN, SGD, torch.cuda.amp, cudnn flags and optional DDP over NCCL.
Runs on the CPU when CUDA is absent; prints the per-step losses as JSON on its last line."""
import argparse
import json
import os

import torch
import torch.backends.cudnn as cudnn
import torch.distributed as dist
import torch.nn as nn
import torch.nn.parallel
import torch.optim
import torch.utils.data
import torch.utils.data.distributed

parser = argparse.ArgumentParser(description="PyTorch ImageNet-style training")
parser.add_argument("--steps", default=4, type=int)
parser.add_argument("-b", "--batch-size", default=8, type=int)
parser.add_argument("--lr", default=0.05, type=float)
parser.add_argument("--amp", action="store_true", help="mixed precision with torch.cuda.amp")
parser.add_argument("--world-size", default=-1, type=int)
parser.add_argument("--rank", default=-1, type=int)
parser.add_argument("--dist-url", default="env://", type=str)
parser.add_argument("--dist-backend", default="nccl", type=str)
parser.add_argument("--gpu", default=None, type=int, help="GPU id to use.")
parser.add_argument("--seed", default=0, type=int)


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    cudnn.benchmark = True
    if args.world_size == -1 and "WORLD_SIZE" in os.environ:
        args.world_size = int(os.environ["WORLD_SIZE"])
    args.distributed = args.world_size > 1
    if args.distributed:
        if args.rank == -1:
            args.rank = int(os.environ["RANK"])
        args.gpu = int(os.environ.get("LOCAL_RANK", 0))
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)

    model = SmallNet()
    use_cuda = torch.cuda.is_available()
    if args.distributed:
        torch.cuda.set_device(args.gpu)
        model.cuda(args.gpu)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    elif use_cuda:
        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)
            model = model.cuda(args.gpu)
        else:
            model = model.cuda()
    if use_cuda:
        device = torch.device("cuda:{}".format(args.gpu) if args.gpu is not None else "cuda")
    else:
        device = torch.device("cpu")

    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp and use_cuda)

    g = torch.Generator().manual_seed(1234)
    images = torch.randn(args.steps * args.batch_size * max(args.world_size, 1), 3, 16, 16, generator=g)
    labels = torch.randint(0, 10, (images.shape[0],), generator=g)
    dataset = torch.utils.data.TensorDataset(images, labels)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=False) if args.distributed else None
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=False, sampler=sampler,
                                         pin_memory=use_cuda)

    losses = []
    model.train()
    for i, (x, target) in enumerate(loader):
        if args.gpu is not None and use_cuda:
            x = x.cuda(args.gpu, non_blocking=True)
        if use_cuda:
            target = target.cuda(args.gpu, non_blocking=True)
        x = x.to(device)
        with torch.cuda.amp.autocast(enabled=args.amp and use_cuda):
            output = model(x)
            loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    if use_cuda:
        torch.cuda.synchronize()
    if not args.distributed or dist.get_rank() == 0:
        print(json.dumps({"device": str(device), "accelerated": use_cuda, "losses": losses}))
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

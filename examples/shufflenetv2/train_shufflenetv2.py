"""ShuffleNetV2 trained with torch_npu's affinity library (seed 003's ShuffleNetV2 tuning case): the channel
shuffle is torch_npu.contrib.module.ChannelShuffle (cat + shuffle + chunk as index_selects), batches reach the
npu through torch_npu.contrib.module.Prefetcher (copies overlapped on a side stream), and the loss is
LabelSmoothingCrossEntropy. `--plain` trains the same network with the original view/transpose shuffle, a plain
DataLoader loop and the smoothed loss written out, which is the reference the affinity run must equal.

    python examples/shufflenetv2/train_shufflenetv2.py --steps 20              # npu, affinity modules
    python examples/shufflenetv2/train_shufflenetv2.py --device cpu --plain    # the reference
"""

import argparse
import time

import torch
import torch.nn as nn

from torch_npu.contrib.module import ChannelShuffle, LabelSmoothingCrossEntropy, Prefetcher


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="ShuffleNetV2 with torch_npu's affinity modules")
    p.add_argument("--device", default="npu", choices=["npu", "cpu"])
    p.add_argument("--plain", action="store_true", help="original shuffle, DataLoader loop, written-out loss")
    p.add_argument("--width", default="tiny", choices=["tiny", "x0_5", "x1_0"])
    p.add_argument("--steps", default=20, type=int)
    p.add_argument("--batch-size", default=16, type=int)
    p.add_argument("--image-size", default=32, type=int)
    p.add_argument("--classes", default=10, type=int)
    p.add_argument("--smoothing", default=0.1, type=float)
    p.add_argument("--lr", default=0.1, type=float)
    p.add_argument("--seed", default=0, type=int)
    p.add_argument("--print-freq", default=5, type=int)
    return p.parse_args(argv)


def plain_shuffle(x1, x2):
    """The original: concatenate, view as (groups, c / groups), transpose, flatten."""
    x = torch.cat((x1, x2), 1)
    n, c, h, w = x.shape
    return x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, affinity, split_output):
        super().__init__()
        self.stride, bf = stride, oup // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True),
            nn.Conv2d(bf, bf, 3, stride, 1, groups=bf, bias=False), nn.BatchNorm2d(bf),
            nn.Conv2d(bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        # The affinity module hands the next block its input already split in two.
        self.shuffle = ChannelShuffle(oup, groups=2, split_shuffle=split_output) if affinity else None

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x if isinstance(x, tuple) else x.chunk(2, dim=1)
            a, b = x1, self.branch2(x2)
        else:
            a, b = self.branch1(x), self.branch2(x)
        return self.shuffle(a, b) if self.shuffle is not None else plain_shuffle(a, b)


class ShuffleNetV2(nn.Module):
    WIDTHS = {"tiny": ([2, 2, 1], [8, 16, 32, 64, 128]), "x0_5": ([4, 8, 4], [24, 48, 96, 192, 1024]),
              "x1_0": ([4, 8, 4], [24, 116, 232, 464, 1024])}

    def __init__(self, width, num_classes, affinity):
        super().__init__()
        repeats, ch = self.WIDTHS[width]
        self.conv1 = nn.Sequential(nn.Conv2d(3, ch[0], 3, 1, 1, bias=False), nn.BatchNorm2d(ch[0]), nn.ReLU(True))
        blocks, inp = [], ch[0]
        for n, oup in zip(repeats, ch[1:4]):
            for j in range(n):
                blocks.append(InvertedResidual(inp, oup, 2 if j == 0 else 1, affinity, split_output=j < n - 1))
                inp = oup
        self.stages = nn.Sequential(*blocks)
        self.conv5 = nn.Sequential(nn.Conv2d(inp, ch[4], 1, bias=False), nn.BatchNorm2d(ch[4]), nn.ReLU(True))
        self.fc = nn.Linear(ch[4], num_classes)

    def forward(self, x):
        return self.fc(self.conv5(self.stages(self.conv1(x))).mean([2, 3]))


def smoothed_cross_entropy(pred, target, classes, smoothing):
    """LabelSmoothingCrossEntropy written out: 1 - s on the true class, s / (classes - 1) on the others."""
    q = torch.full_like(pred, smoothing / (classes - 1)).scatter_(1, target.unsqueeze(1), 1 - smoothing)
    return -(q * torch.log_softmax(pred, 1)).sum(1).mean()


def run(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = ShuffleNetV2(args.width, args.classes, affinity=not args.plain).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = LabelSmoothingCrossEntropy(args.classes, args.smoothing)
    g = torch.Generator().manual_seed(args.seed + 1)
    images = torch.randn(args.steps * args.batch_size, 3, args.image_size, args.image_size, generator=g)
    labels = torch.randint(0, args.classes, (images.shape[0],), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=args.batch_size,
                                         pin_memory=args.device == "npu")
    batches = iter(loader) if args.plain or args.device == "cpu" else Prefetcher(loader)
    losses, start = [], time.perf_counter()
    model.train()
    for step, (x, y) in enumerate(batches):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = model(x)
        loss = smoothed_cross_entropy(out, y, args.classes, args.smoothing) if args.plain else criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if args.print_freq and step % args.print_freq == 0:
            print(f"step {step:4d}  loss {losses[-1]:.4f}")
    elapsed = time.perf_counter() - start
    ips = len(losses) * args.batch_size / elapsed
    print(f"{'plain' if args.plain else 'affinity'} ShuffleNetV2-{args.width} on {args.device}: "
          f"{len(losses)} steps, final loss {losses[-1]:.4f}, {ips:.1f} img/s")
    return {"losses": losses, "images_per_sec": ips}


if __name__ == "__main__":
    run()

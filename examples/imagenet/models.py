"""Models for the ImageNet-style trainer: ResNet (BasicBlock/Bottleneck) and ShuffleNetV2 with the
seed's channel-shuffle rewrites. Tiny variants (`resnet_tiny`, `shufflenet_v2_tiny`) are for CI."""

import torch
import torch.nn as nn


# --- ResNet -------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inp, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inp, planes, stride=1):
        super().__init__()
        out = planes * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(inp, planes, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
            nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes), nn.ReLU(inplace=True),
            nn.Conv2d(planes, out, 1, bias=False), nn.BatchNorm2d(out),
        )
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.body(x) + identity)


class ResNet(nn.Module):
    """`small_input=True` uses a 3x3 stem without max pooling (for 32x32 images)."""

    def __init__(self, block, layers, widths, num_classes=1000, small_input=False):
        super().__init__()
        stem = widths[0]
        if small_input:
            self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem),
                                      nn.ReLU(inplace=True))
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        stages, inp = [], stem
        for i, (n, width) in enumerate(zip(layers, widths)):
            for j in range(n):
                stages.append(block(inp, width, stride=2 if (i > 0 and j == 0) else 1))
                inp = width * block.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inp, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


# --- ShuffleNetV2 -------------------------------------------------------------------------------
def channel_shuffle(x, groups):
    """The original: view, transpose, contiguous (a strided copy a device handles badly)."""
    n, c, h, w = x.shape
    x = x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(n, c, h, w)


def shuffle_permutation(channels, groups=2):
    """out[:, i] = in[:, perm[i]]: the channel order channel_shuffle produces."""
    return torch.arange(channels).view(groups, channels // groups).t().flatten()


class ChannelShuffle(nn.Module):
    """Concatenate two branches and shuffle their channels. impl: "transpose" (original),
    "index_select" (seed 003's equivalent rewrite) or "fused" (torch_npu.contrib.module.ChannelShuffle:
    cat + shuffle [+ chunk] as one autograd function of index_selects, the affinity library's form)."""

    def __init__(self, channels, impl="transpose", split=False):
        super().__init__()
        if impl not in ("transpose", "index_select", "fused"):
            raise ValueError(f"channel shuffle impl must be transpose, index_select or fused, got {impl!r}")
        self.impl, self.split = impl, split and impl == "fused"
        # A buffer, so model.to(device) moves it once instead of copying it every step.
        self.register_buffer("perm", shuffle_permutation(channels), persistent=False)
        if impl == "fused":
            # Imported here: the CPU-only runs of these models (the demo's reference) never load torch_npu.
            from torch_npu.contrib.module import ChannelShuffle as AffinityChannelShuffle

            self.fused = AffinityChannelShuffle(channels, groups=2, split_shuffle=self.split)

    def forward(self, x1, x2):
        if self.impl == "fused":
            return self.fused(x1, x2)
        x = torch.cat((x1, x2), 1)
        return channel_shuffle(x, 2) if self.impl == "transpose" else x.index_select(1, self.perm)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, shuffle_impl="transpose", split_output=False):
        super().__init__()
        self.stride = stride
        bf = oup // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True),
            nn.Conv2d(bf, bf, 3, stride, 1, groups=bf, bias=False), nn.BatchNorm2d(bf),
            nn.Conv2d(bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        self.shuffle = ChannelShuffle(2 * bf, shuffle_impl, split=split_output)

    def forward(self, x):
        if self.stride == 1:
            # A fused previous block hands over its output already split in two.
            x1, x2 = x if isinstance(x, tuple) else x.chunk(2, dim=1)
            return self.shuffle(x1, self.branch2(x2))
        return self.shuffle(self.branch1(x), self.branch2(x))


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats, channels, num_classes=1000, shuffle_impl="transpose", small_input=False):
        super().__init__()
        c0 = channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(3, c0, 3, 1 if small_input else 2, 1, bias=False), nn.BatchNorm2d(c0),
                                   nn.ReLU(inplace=True))
        self.maxpool = nn.Identity() if small_input else nn.MaxPool2d(3, 2, 1)
        blocks, inp = [], c0
        for n, oup in zip(repeats, channels[1:4]):
            for j in range(n):
                # Within a stage the next block chunks this one's output: hand it over pre-split.
                blocks.append(InvertedResidual(inp, oup, 2 if j == 0 else 1, shuffle_impl, split_output=j < n - 1))
                inp = oup
        self.stages = nn.Sequential(*blocks)
        self.conv5 = nn.Sequential(nn.Conv2d(inp, channels[4], 1, bias=False), nn.BatchNorm2d(channels[4]),
                                   nn.ReLU(inplace=True))
        self.fc = nn.Linear(channels[4], num_classes)

    def forward(self, x):
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        return self.fc(x.mean([2, 3]))


def build_model(arch, num_classes, shuffle_impl="transpose"):
    """Model by name. Tiny variants take 32x32 images; the full-size ones are torchvision's shapes."""
    archs = {
        "resnet_tiny": lambda: ResNet(BasicBlock, [1, 1, 1], [16, 32, 64], num_classes, small_input=True),
        "resnet18": lambda: ResNet(BasicBlock, [2, 2, 2, 2], [64, 128, 256, 512], num_classes),
        "resnet50": lambda: ResNet(Bottleneck, [3, 4, 6, 3], [64, 128, 256, 512], num_classes),
        "shufflenet_v2_tiny": lambda: ShuffleNetV2([2, 2, 1], [8, 16, 32, 64, 128], num_classes, shuffle_impl,
                                                   small_input=True),
        "shufflenet_v2_x1_0": lambda: ShuffleNetV2([4, 8, 4], [24, 116, 232, 464, 1024], num_classes, shuffle_impl),
    }
    if arch not in archs:
        raise ValueError(f"unknown --arch {arch!r}; choose one of {', '.join(archs)}")
    return archs[arch]()

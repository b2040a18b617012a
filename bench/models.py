"""The benchmark's own models: a small CNN and a small GPT-style transformer, with synthetic batches.

Sized so one training step takes tens of milliseconds on a 2-core CPU; `quick` shrinks them for smoke runs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU stages (two of them downsampling), global pooling and a linear classifier."""

    def __init__(self, width: int = 32, classes: int = 10):
        super().__init__()
        layers, cin = [], 3
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            layers += [nn.Conv2d(cin, cout, 3, stride=1 if i == 0 else 2, padding=1, bias=False),
                       nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class SmallTransformer(nn.Module):
    """A small GPT: token + position embeddings, `layers` blocks, final norm and a tied output head."""

    def __init__(self, vocab: int = 512, dim: int = 128, heads: int = 4, layers: int = 2, context: int = 64):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.blocks(self.tokens(idx) + self.positions(pos))
        return self.norm(x) @ self.tokens.weight.t()


def cnn_setup(device: str, quick: bool = False):
    """(model, optimizer, step function) for the CNN on a fixed synthetic batch on `device`."""
    torch.manual_seed(0)
    batch, size, width = (4, 16, 8) if quick else (16, 32, 32)
    model = SmallCNN(width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=gen).to(device)
    y = torch.randint(0, 10, (batch,), generator=gen).to(device)
    return model, opt, _step_fn(model, opt, x, y)


def transformer_setup(device: str, quick: bool = False):
    """(model, optimizer, step function) for the transformer on a fixed synthetic batch on `device`."""
    torch.manual_seed(0)
    batch, context, dim = (2, 16, 32) if quick else (8, 64, 128)
    vocab = 512
    model = SmallTransformer(vocab, dim, heads=4, layers=2, context=context).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab, (batch, context + 1), generator=gen).to(device)
    return model, opt, _step_fn(model, opt, tokens[:, :-1], tokens[:, 1:])


def _step_fn(model, opt, x, y):
    def step(forward=model):
        logits = forward(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


SETUPS = {"CNN": cnn_setup, "transformer": transformer_setup}

"""A small GPT-style character language model trained on a bundled text file, on npu or cpu, with
optional native mixed precision (torch.autocast("npu") + torch.npu.amp.GradScaler) and a fused AdamW.

    python examples/gpt/train_gpt.py --steps 200 --amp --optimizer npu_fused_adamw
"""

import argparse
import contextlib
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from tqdm import tqdm
except ImportError:  # progress bars are optional
    tqdm = None

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="character-level GPT on a small text file")
    p.add_argument("--data", default=os.path.join(HERE, "tiny_corpus.txt"))
    p.add_argument("--device", default="npu", choices=["npu", "cpu"])
    p.add_argument("--steps", default=200, type=int)
    p.add_argument("--batch-size", default=16, type=int)
    p.add_argument("--block-size", default=64, type=int, help="context length in characters")
    p.add_argument("--layers", default=2, type=int)
    p.add_argument("--heads", default=4, type=int)
    p.add_argument("--embed", default=64, type=int)
    p.add_argument("--lr", default=3e-3, type=float)
    p.add_argument("--weight-decay", default=0.01, type=float)
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "npu_fused_adamw"])
    p.add_argument("--amp", action="store_true", help="torch.autocast + GradScaler")
    p.add_argument("--amp-dtype", default="float16", choices=["float16", "bfloat16"])
    p.add_argument("--seed", default=0, type=int)
    p.add_argument("--print-freq", default=10, type=int, help="print the loss every N steps (0: never)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--sample", default=120, type=int, help="characters to generate after training (0: none)")
    p.add_argument("--dump", default=None, help="torch.utils.dumper: write the ops of --dump-steps to this .h5 file")
    p.add_argument("--dump-stats", action="store_true", help="dump statistics (max/min/mean/L2 norm) instead of data")
    p.add_argument("--dump-steps", default="0", help="comma-separated steps to dump (default: the first)")
    return p.parse_args(argv)


class Block(nn.Module):
    def __init__(self, embed, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.mlp = nn.Sequential(nn.Linear(embed, 4 * embed), nn.GELU(), nn.Linear(4 * embed, embed))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, block_size, layers, heads, embed):
        super().__init__()
        self.block_size = block_size
        self.tok = nn.Embedding(vocab, embed)
        self.pos = nn.Embedding(block_size, embed)
        self.blocks = nn.Sequential(*[Block(embed, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(embed)
        self.head = nn.Linear(embed, vocab, bias=False)

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(positions))))

    @torch.no_grad()
    def generate(self, idx, n, generator=None):
        for _ in range(n):
            logits = self(idx[:, -self.block_size:])[:, -1].float()
            probs = F.softmax(logits, dim=-1).cpu()
            nxt = torch.multinomial(probs, 1, generator=generator).to(idx.device)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


def load_text(path):
    if not os.path.isfile(path):
        raise SystemExit(f"--data {path}: no such file")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return torch.tensor([stoi[c] for c in text], dtype=torch.long), chars


def run(argv=None):
    """Train as the command line says; returns {"losses", "tokens_per_sec", "sample"}."""
    args = parse_args(argv)
    if args.device == "npu":
        import torch_npu  # noqa: F401
    data, chars = load_text(args.data)
    if len(data) <= args.block_size + 1:
        raise SystemExit(f"--data has {len(data)} characters; it needs more than --block-size {args.block_size}")
    torch.manual_seed(args.seed)
    model = TinyGPT(len(chars), args.block_size, args.layers, args.heads, args.embed).to(args.device)
    if args.optimizer == "npu_fused_adamw":
        from torch_npu.optim import NpuFusedAdamW

        optimizer = NpuFusedAdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    dtype = getattr(torch, args.amp_dtype)
    scaler = torch.amp.GradScaler(args.device, enabled=args.amp and dtype == torch.float16)
    batches = torch.Generator().manual_seed(args.seed)
    offsets = torch.arange(args.block_size)

    steps = range(args.steps)
    if tqdm is not None and not args.no_progress:
        steps = tqdm(steps, desc="train", leave=False, dynamic_ncols=True)
    dump = contextlib.nullcontext()
    if args.dump:
        dump = torch.utils.dumper(use_dump=True, dump_path=args.dump, stats_only=args.dump_stats,
                                  steps=[int(s) for s in args.dump_steps.split(",")])
    with dump:
        losses, rate = _train(args, model, optimizer, scaler, dtype, data, batches, offsets, steps, dump)
    print(f"trained {args.steps} steps on {args.device}: {rate:.1f} tokens/s, final loss {losses[-1]:.4f}")
    sample = ""
    if args.sample:
        model.eval()
        start = data[:1].view(1, 1).to(args.device)
        out = model.generate(start, args.sample, generator=torch.Generator().manual_seed(args.seed))
        sample = "".join(chars[i] for i in out[0].tolist())
        print("sample:", sample.replace("\n", " "))
    return {"losses": losses, "tokens_per_sec": rate, "sample": sample}


def _train(args, model, optimizer, scaler, dtype, data, batches, offsets, steps, dump):
    losses, timed_tokens, timed_seconds = [], 0, 0.0
    log = tqdm.write if tqdm is not None and not args.no_progress else print
    end = time.perf_counter()
    for step in steps:
        starts = torch.randint(0, len(data) - args.block_size - 1, (args.batch_size,), generator=batches)
        x = data[starts[:, None] + offsets].pin_memory() if args.device == "npu" else data[starts[:, None] + offsets]
        y = data[starts[:, None] + offsets + 1]
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        with torch.autocast(args.device, dtype=dtype, enabled=args.amp):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss_value = loss.item()
        now = time.perf_counter()
        if step > 0:  # leave the first step's one-time setup out of the throughput
            timed_tokens += x.numel()
            timed_seconds += now - end
        end = now
        losses.append(loss_value)
        if args.print_freq and step % args.print_freq == 0:
            rate = timed_tokens / timed_seconds if timed_seconds else float("nan")
            log(f"step {step:>4} loss {loss_value:.4f} (ppl {math.exp(loss_value):7.2f}) {rate:9.1f} tokens/s")
        if hasattr(steps, "set_postfix"):
            steps.set_postfix(loss=f"{loss_value:.4f}")
        if args.dump:
            dump.step()
    return losses, timed_tokens / timed_seconds if timed_seconds else float("nan")


if __name__ == "__main__":
    run()

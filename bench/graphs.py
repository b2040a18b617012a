"""NPU graphs: replayed tiny ops vs CPU eager, reduce-overhead vs default compiled calls, graphed vs
eager decoding, and a capture/replay/reset long run.

Run alone: .venv/bin/python bench/graphs.py [--quick]
"""

import gc
import time

import torch

from common import interleaved, row, stats, sync
from long_runs import rss_bytes

SECTION = "graphs"
TARGET_REPLAY = 0.5  # replayed per-op time at most half CPU eager's
TARGET_REDUCE_OVERHEAD = 0.6  # reduce-overhead call at most 0.6x a default compiled call
TARGET_DECODE = 1 / 1.5  # graphed decoding at least 1.5x eager tokens/s (time per token ratio)
TARGET_RSS_GROWTH_PCT = 1.0


def tiny_ops(a, b, ops=200):
    x = a
    for _ in range(ops // 4):
        x = x + b
        x = x * 0.5
        x = torch.relu(x)
        x = x - 0.1
    return x


def _replay_row(repeats: int, inner: int) -> dict:
    a, b = torch.randn(16, device="npu"), torch.randn(16, device="npu")
    ac, bc = a.cpu(), b.cpu()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = tiny_ops(a, b)
    g.replay()
    torch.testing.assert_close(out.cpu(), tiny_ops(ac, bc))
    cases = [(lambda: tiny_ops(ac, bc), "cpu", inner), (g.replay, "npu", inner)]
    cpu, npu = interleaved(cases, repeats, warmup=5)
    per_op = lambda samples: stats(s / 200 * 1e6 for s in samples)  # noqa: E731
    return row(SECTION, "graph of 200 tiny ops (16 elements): us per op, replay vs CPU eager", "us",
               per_op(npu), per_op(cpu), target=TARGET_REPLAY, key=f"{SECTION}.replay_per_op",
               note=f"{g._task_count()} captured tasks replayed as one")


def _mlp(layers=40, width=16):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def _reduce_overhead_row(repeats: int, inner: int) -> dict:
    torch.manual_seed(0)
    model = _mlp().npu().eval()
    x = torch.randn(4, 16, device="npu")
    default = torch.compile(model, backend="npu")
    reduced = torch.compile(model, backend="npu", mode="reduce-overhead")
    with torch.no_grad():
        for f in (default, reduced):
            for _ in range(3):
                f(x)
        torch.testing.assert_close(reduced(x).cpu(), default(x).cpu())
        cases = [(lambda: default(x), "npu", inner), (lambda: reduced(x), "npu", inner)]
        dflt, red = interleaved(cases, repeats, warmup=5)
    us = lambda samples: stats(s * 1e6 for s in samples)  # noqa: E731
    return row(SECTION, "40-layer tiny MLP, torch.compile: us per call, reduce-overhead vs default mode", "us",
               us(red), us(dflt), ref_label="default mode", target=TARGET_REDUCE_OVERHEAD,
               key=f"{SECTION}.reduce_overhead", note="inference (torch.no_grad()), batch 4, width 16")


class TinyGPT(torch.nn.Module):
    """A decoder with a static KV cache: one token per step, positions and cache writes on the device,
    so a step has fixed shapes and no host reads (what a graph needs)."""

    def __init__(self, vocab=128, dim=64, heads=4, layers=2, max_len=64):
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.embed = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(max_len, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(dim), "qkv": torch.nn.Linear(dim, 3 * dim), "proj": torch.nn.Linear(dim, dim),
                "ln2": torch.nn.LayerNorm(dim), "fc1": torch.nn.Linear(dim, 4 * dim), "fc2": torch.nn.Linear(4 * dim, dim)}))
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)

    def new_cache(self, device):
        dim = self.embed.embedding_dim
        return [torch.zeros(2, self.heads, self.max_len, dim // self.heads, device=device) for _ in self.blocks]

    def step(self, token, position, cache):
        """token, position: int64 tensors of shape (1,); returns the next token (greedy), shape (1,)."""
        h = self.embed(token) + self.pos(position)  # (1, dim)
        steps = torch.arange(self.max_len, device=token.device)
        mask = torch.where(steps <= position, 0.0, float("-inf"))  # (max_len,)
        for block, kv in zip(self.blocks, cache):
            q, k, v = block["qkv"](block["ln1"](h)).view(1, 3, self.heads, -1).unbind(1)  # (1, heads, hd)
            kv[0].index_copy_(1, position, k.transpose(0, 1))
            kv[1].index_copy_(1, position, v.transpose(0, 1))
            scores = (q.transpose(0, 1) @ kv[0].transpose(1, 2)) / (q.shape[-1] ** 0.5) + mask  # (heads, 1, max_len)
            att = torch.softmax(scores, dim=-1) @ kv[1]  # (heads, 1, hd)
            h = h + block["proj"](att.transpose(0, 1).reshape(1, -1))
            h = h + block["fc2"](torch.nn.functional.gelu(block["fc1"](block["ln2"](h))))
        return self.head(self.ln(h)).argmax(-1)


def decode_eager(model, cache, tokens: int, device: str):
    token = torch.zeros(1, dtype=torch.long, device=device)
    out = []
    for i in range(tokens):
        token = model.step(token, torch.tensor([i], device=device) if device == "cpu" else
                           torch.full((1,), i, dtype=torch.long, device=device), cache)
        out.append(token)
    return torch.cat(out)


def decode_graphed(model, tokens: int):
    cache = model.new_cache("npu")
    token = torch.zeros(1, dtype=torch.long, device="npu")
    position = torch.zeros(1, dtype=torch.long, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        nxt = model.step(token, position, cache)
        token.copy_(nxt)
        position.add_(1)
    outs = torch.empty(tokens, dtype=torch.long, device="npu")

    def run():
        for c in cache:
            c.zero_()
        token.zero_()
        position.zero_()
        for i in range(tokens):
            g.replay()
            outs[i:i + 1].copy_(token)
        return outs

    return run


def _decode_row(repeats: int, tokens: int) -> dict:
    torch.manual_seed(0)
    model = TinyGPT().npu().eval()
    with torch.no_grad():
        graphed = decode_graphed(model, tokens)
        eager_cache = model.new_cache("npu")

        def eager():
            for c in eager_cache:
                c.zero_()
            return decode_eager(model, eager_cache, tokens, "npu")

        assert torch.equal(graphed().cpu(), eager().cpu()), "graphed decoding must produce the eager tokens"
        cases = [(eager, "npu", 1), (graphed, "npu", 1)]
        e, g = interleaved(cases, repeats, warmup=1)
    per_token = lambda samples: stats(s / tokens * 1e6 for s in samples)  # noqa: E731
    eg, gg = per_token(e), per_token(g)
    return row(SECTION, f"tiny GPT decoding (batch 1, {tokens} tokens): us per token, graphed vs eager", "us",
               gg, eg, ref_label="npu eager", target=TARGET_DECODE, key=f"{SECTION}.decode",
               note=f"{1e6 / gg['median']:.0f} vs {1e6 / eg['median']:.0f} tokens/s; 2 layers, dim 64, greedy")


def _cycles_row(cycles: int) -> list:
    x = torch.randn(64, 64, device="npu")
    side = torch.npu.Stream()

    def cycle():
        # capture_begin / capture_end directly: torch.npu.graph's entry also collects garbage and
        # empties the cache, which would hide what the cycle itself leaves behind (and take longer).
        g = torch.npu.NPUGraph()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            g.capture_begin()
            y = torch.relu(x @ x) + 1
            g.capture_end()
        torch.npu.current_stream().wait_stream(side)
        g.replay()
        g.reset()
        del y

    for _ in range(max(10, cycles // 100)):
        cycle()
    gc.collect()
    sync("npu")
    # No empty_cache(): each cycle's pool must give its memory back by itself.
    rss_warm, reserved_warm = rss_bytes(), torch.npu.memory_reserved()
    start = time.perf_counter()
    for _ in range(cycles):
        cycle()
    seconds = time.perf_counter() - start
    gc.collect()
    sync("npu")
    rss_end, reserved_end = rss_bytes(), torch.npu.memory_reserved()
    growth = 100.0 * (rss_end - rss_warm) / rss_warm
    one = lambda v: stats([v])  # noqa: E731
    return [
        row(SECTION, f"{cycles} capture/replay/reset cycles: host RSS growth (%)", "%", one(growth), ratio=growth,
            target=TARGET_RSS_GROWTH_PCT, key=f"{SECTION}.cycles_rss",
            note=f"{rss_warm / 2**20:.0f} -> {rss_end / 2**20:.0f} MiB; {seconds / cycles * 1e6:.0f} us per cycle"),
        row(SECTION, f"{cycles} capture/replay/reset cycles: device memory reserved growth", "bytes",
            one(reserved_end - reserved_warm), ratio=reserved_end - reserved_warm, target=0,
            key=f"{SECTION}.cycles_reserved"),
    ]


def run(quick: bool = False) -> list:
    repeats, inner, tokens, cycles = (3, 20, 16, 200) if quick else (7, 200, 48, 10_000)
    return ([_replay_row(repeats, inner), _decode_row(repeats, tokens), _reduce_overhead_row(repeats, inner)] +
            _cycles_row(cycles))


if __name__ == "__main__":
    from run import standalone
    standalone(run)

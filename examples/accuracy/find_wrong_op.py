"""The accuracy walk-through (docs/accuracy.md): a small transformer-style block trained one step on
the CPU and on npu, dumped with torch.utils.dumper, compared with msaccucmp.

    python find_wrong_op.py cpu  DIR   # writes DIR/model_cpu.h5
    python find_wrong_op.py npu  DIR   # replays DIR/model_cpu.h5 on npu, writes DIR/model_npu.h5
    python find_wrong_op.py free DIR   # npu without replay: DIR/model_npu_free.h5 (errors spread)
"""

import os
import sys

import torch
import torch_npu  # noqa: F401


class Block(torch.nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.act = torch.nn.GELU()
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


def make_model_and_data():
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block(), torch.nn.Linear(32, 10))
    x = torch.randn(8, 32)
    target = torch.randint(0, 10, (8,))
    return model, x, target


def step(model, x, target):
    loss = torch.nn.functional.cross_entropy(model(x), target)
    loss.backward()
    return loss


def main(mode: str, out_dir: str) -> None:
    model, x, target = make_model_and_data()
    os.makedirs(out_dir, exist_ok=True)
    if mode == "cpu":
        with torch.utils.dumper(use_dump=True, dump_path=os.path.join(out_dir, "model_cpu.h5")):
            step(model, x, target)
        return
    model, x, target = model.npu(), x.npu(), target.npu()
    if mode == "npu":
        with torch.utils.dumper(use_dump=True, load_file_path=os.path.join(out_dir, "model_cpu.h5"),
                                dump_path=os.path.join(out_dir, "model_npu.h5")):
            step(model, x, target)
    else:
        with torch.utils.dumper(use_dump=True, dump_path=os.path.join(out_dir, "model_npu_free.h5")):
            step(model, x, target)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ".")

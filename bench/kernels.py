"""Large kernels: matmul, conv2d, softmax, layer_norm and add on large fp32 tensors, npu vs CPU eager time."""

import torch
import torch.nn.functional as F

from common import calls_for, interleaved, row, stats

SECTION = "kernels"
TARGET_RATIO = 1.05  # npu time at most 1.05x CPU eager's


def _cases(quick: bool) -> list:
    """(key, name, input shapes, function) per kernel; quick mode shrinks sizes, names say the size."""
    mm1, mm2 = (128, 256) if quick else (1024, 2048)
    n, c, hw = (2, 8, 16) if quick else (32, 64, 56)
    sm = 256 if quick else 4096
    ln_rows, ln_cols = (256, 128) if quick else (8192, 1024)
    add_n = 1 << 16 if quick else 1 << 24
    return [
        ("matmul", f"matmul {mm1}x{mm1} fp32", [(mm1, mm1), (mm1, mm1)], torch.matmul),
        ("matmul_large", f"matmul {mm2}x{mm2} fp32", [(mm2, mm2), (mm2, mm2)], torch.matmul),
        ("conv2d", f"conv2d N={n} C={c} {hw}x{hw} 3x3 fp32", [(n, c, hw, hw), (c, c, 3, 3)],
         lambda x, w: F.conv2d(x, w, padding=1)),
        ("softmax", f"softmax {sm}x{sm} fp32", [(sm, sm)], lambda x: torch.softmax(x, dim=-1)),
        ("layer_norm", f"layer_norm {ln_rows}x{ln_cols} fp32", [(ln_rows, ln_cols), (ln_cols,), (ln_cols,)],
         lambda x, w, b: F.layer_norm(x, (ln_cols,), w, b)),
        ("add", f"add {add_n >> 20}M elements fp32" if add_n >= 1 << 20 else f"add {add_n} elements fp32",
         [(add_n,), (add_n,)], torch.add),
    ]


def run(quick: bool = False) -> list:
    repeats, min_sample = (2, 0.002) if quick else (7, 0.15)
    rows = []
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for key, name, shapes, fn in _cases(quick):
            cpu_args = [torch.randn(s, generator=gen) for s in shapes]
            npu_args = [t.to("npu") for t in cpu_args]
            cpu_fn = lambda fn=fn, a=cpu_args: fn(*a)  # noqa: E731
            npu_fn = lambda fn=fn, a=npu_args: fn(*a)  # noqa: E731
            cpu_fn(), npu_fn()  # first call: allocator, Meta caches, one-time kernel setup
            inner = calls_for(cpu_fn, "cpu", min_sample)
            cpu, npu = interleaved([(cpu_fn, "cpu", inner), (npu_fn, "npu", inner)], repeats)
            rows.append(row(SECTION, f"{name}: ms per call", "ms", stats(s * 1e3 for s in npu),
                            stats(s * 1e3 for s in cpu), target=TARGET_RATIO,
                            key=f"{SECTION}.{key}"))
            del cpu_args, npu_args
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)

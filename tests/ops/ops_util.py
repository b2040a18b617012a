"""Shared helpers for the per-family npu-vs-CPU operator tests in tests/ops/."""

import json
import textwrap

import torch

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
HALF = (torch.float16, torch.bfloat16)

# Absolute / relative tolerances per dtype. Named device ops may accumulate in a different order than
# the CPU kernels, so float32 gets a little room; half dtypes are compared against the CPU computing
# in the same dtype and may differ by a couple of units in the last place.
TOL = {
    torch.float32: (1e-5, 1.3e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 2e-3),
    torch.bfloat16: (8e-3, 1.6e-2),
}


def tol(dtype, scale=1.0):
    atol, rtol = TOL.get(dtype, (0.0, 0.0))
    return {"atol": atol * scale, "rtol": rtol * scale}


def rand(shape, dtype=torch.float32, lo=-2.0, hi=2.0, noncontig=False):
    """A CPU tensor with values in [lo, hi); noncontig=True gives a transposed or sliced view."""
    if noncontig:
        if len(shape) >= 2:  # transpose of the last two dims, built as a view of a contiguous tensor
            base = rand(tuple(shape[:-2]) + (shape[-1], shape[-2]), dtype, lo, hi)
            return base.transpose(-1, -2)
        base = rand(tuple(shape[:-1]) + (shape[-1] * 2,), dtype, lo, hi) if shape else rand((), dtype, lo, hi)
        return base[..., ::2] if shape else base
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape)).bool()
    if not dtype.is_floating_point:
        return torch.randint(int(lo), int(hi), tuple(shape), dtype=dtype)
    return (torch.rand(tuple(shape), dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def distinct(shape, dtype=torch.float32, noncontig=False):
    """Values that are all different (a shuffled range): max / argmax / pooling indices have no ties."""
    n = 1
    for s in shape:
        n *= s
    assert dtype not in HALF or n <= 256, "half dtypes hold distinct integers only up to 256"
    vals = (torch.randperm(max(n, 1))[:n].float() - n // 2).to(dtype)
    t = vals.reshape(tuple(shape))
    if noncontig and len(shape) >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def to_npu(obj):
    """Tensors (also inside lists / tuples / dicts) to npu; views stay views of the same layout."""
    if isinstance(obj, torch.Tensor):
        return _copy_layout(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_npu(o) for o in obj)
    if isinstance(obj, dict):
        return {k: to_npu(v) for k, v in obj.items()}
    return obj


def _copy_layout(t):
    """Copy `t` to npu keeping its strides (a transposed CPU view becomes a transposed npu view)."""
    if t.is_contiguous():
        out = t.detach().to("npu")
    else:
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="npu")
        out.copy_(t.detach())
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def assert_same(npu_out, cpu_out, dtype=None, scale=1.0, check_device=True):
    """npu result(s) equal the CPU result(s): same dtype, shape and values (exact for int / bool)."""
    if isinstance(cpu_out, (tuple, list)):
        assert isinstance(npu_out, (tuple, list)) and len(npu_out) == len(cpu_out)
        for n, c in zip(npu_out, cpu_out):
            assert_same(n, c, dtype, scale, check_device)
        return
    if not isinstance(cpu_out, torch.Tensor):
        assert npu_out == cpu_out
        return
    if check_device:
        assert npu_out.device.type == "npu", f"result is on {npu_out.device}, expected npu"
    assert npu_out.dtype == cpu_out.dtype, f"dtype {npu_out.dtype} != CPU {cpu_out.dtype}"
    assert npu_out.shape == cpu_out.shape, f"shape {tuple(npu_out.shape)} != CPU {tuple(cpu_out.shape)}"
    torch.testing.assert_close(npu_out.detach().cpu(), cpu_out.detach(), equal_nan=True,
                               **tol(dtype or cpu_out.dtype, scale))


def check_vs_cpu(fn, *cpu_args, scale=1.0, **cpu_kwargs):
    """Run fn on the CPU arguments and on npu copies of them; compare results. Returns both."""
    cpu_out = fn(*cpu_args, **cpu_kwargs)
    npu_out = fn(*to_npu(cpu_args), **to_npu(cpu_kwargs))
    assert_same(npu_out, cpu_out, scale=scale)
    return npu_out, cpu_out


def grads_vs_cpu(fn, cpu_inputs, scale=1.0, grad_seed=0, out_index=None):
    """Gradients of fn w.r.t. the floating inputs, npu vs CPU, for a random upstream gradient."""
    cpu_leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x
                  for x in cpu_inputs]
    npu_leaves = [_copy_layout(x.detach()).requires_grad_(x.is_floating_point())
                  if isinstance(x, torch.Tensor) else x for x in cpu_inputs]
    cpu_out = fn(*cpu_leaves)
    npu_out = fn(*npu_leaves)
    if out_index is not None:
        cpu_out, npu_out = cpu_out[out_index], npu_out[out_index]
    assert_same(npu_out, cpu_out, scale=scale)
    gen = torch.Generator().manual_seed(grad_seed)
    upstream = torch.rand(cpu_out.shape, generator=gen).to(cpu_out.dtype)
    cpu_out.backward(upstream)
    npu_out.backward(upstream.to("npu"))
    checked = 0
    for c, n in zip(cpu_leaves, npu_leaves):
        if isinstance(c, torch.Tensor) and c.requires_grad:
            assert (n.grad is None) == (c.grad is None)
            if c.grad is not None:
                assert_same(n.grad, c.grad, scale=scale)
                checked += 1
    assert checked, "no gradient was compared"


def device_op_stats(fn):
    """Run fn (npu work), wait for it, and return the op counters it produced."""
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    fn()
    torch.npu.synchronize()
    return torch.npu.op_stats(reset=True)


def assert_device_ops(stats, names):
    missing = [n for n in names if stats.get(n, {}).get("device_op", 0) < 1]
    generic = sorted(k for k, v in stats.items() if v.get("generic", 0) or v.get("generic_inline", 0))
    assert not missing, f"named device ops not used: {missing}; ran on the generic executor: {generic}"


# ---------------------------------------------------------------------------------------------
# strict mode: each family registers a snippet; the first strict test runs them all in ONE child
# (NPU_SIM_STRICT=1, NPU_SIM_FALLBACK=0) so the folder pays for one interpreter start, not eleven.
# ---------------------------------------------------------------------------------------------

_STRICT_SNIPPETS = {}
_STRICT_RESULTS = {}

_STRICT_PRELUDE = """
import json, traceback, torch
def same(npu, cpu, atol=1e-5, rtol=1.3e-5):
    assert npu.device.type == "npu", npu.device
    torch.testing.assert_close(npu.detach().cpu(), cpu.detach(), atol=atol, rtol=rtol, equal_nan=True)
def npu(t, grad=False):
    return t.detach().to("npu").requires_grad_(grad)
SNIPPETS = json.loads(%r)
for family, code in SNIPPETS.items():
    try:
        torch.manual_seed(0)
        exec(code, {"torch": torch, "same": same, "npu": npu, "F": torch.nn.functional})
        torch.npu.synchronize()
        result = "OK"
    except BaseException:
        try:
            torch.npu.synchronize()
        except BaseException:
            pass
        result = traceback.format_exc()
    print("RESULT " + json.dumps([family, result]), flush=True)
"""


def register_strict(family, code):
    """Register the strict-mode snippet of a family (module import time)."""
    _STRICT_SNIPPETS[family] = textwrap.dedent(code)


def strict_result(run_python, family):
    """Outcome ("OK" or a traceback) of the family's snippet under NPU_SIM_STRICT=1, NPU_SIM_FALLBACK=0."""
    if family not in _STRICT_RESULTS:
        snippets = {k: v for k, v in _STRICT_SNIPPETS.items() if k not in _STRICT_RESULTS}
        proc = run_python(_STRICT_PRELUDE % json.dumps(snippets),
                          env={"NPU_SIM_STRICT": "1", "NPU_SIM_FALLBACK": "0"}, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("RESULT "):
                name, result = json.loads(line[len("RESULT "):])
                _STRICT_RESULTS[name] = result
        if family not in _STRICT_RESULTS:
            return (f"child exited with {proc.returncode} before reporting {family}\n--- stdout\n"
                    f"{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    return _STRICT_RESULTS[family]


def assert_strict_ok(run_python, family):
    result = strict_result(run_python, family)
    assert result == "OK", f"strict mode ({family}):\n{result}"


def check_out_into_views(fn, cpu_args, out_shape, dtype=torch.float32, n_outs=1, out_dtypes=None, scale=1.0):
    """fn(*args, out=dst) writing into strided npu views (every other column; a transpose) equals the CPU."""
    out_dtypes = out_dtypes or [dtype] * n_outs
    out_shape = tuple(out_shape)

    def views(device):
        strided, transposed = [], []
        for dt in out_dtypes:
            base = torch.zeros(out_shape[:-1] + (out_shape[-1] * 2,), dtype=dt, device=device)
            strided.append((base, base[..., ::2]))
            if len(out_shape) >= 2:
                tbase = torch.zeros(out_shape[:-2] + (out_shape[-1], out_shape[-2]), dtype=dt, device=device)
                transposed.append((tbase, tbase.transpose(-1, -2)))
        return [strided] + ([transposed] if transposed else [])

    for cpu_set, npu_set in zip(views("cpu"), views("npu")):
        def dst(pairs):
            outs = tuple(v for _, v in pairs)
            return outs[0] if n_outs == 1 else outs
        fn(*cpu_args, out=dst(cpu_set))
        fn(*to_npu(cpu_args), out=dst(npu_set))
        for (cb, _), (nb, _) in zip(cpu_set, npu_set):
            assert_same(nb, cb, scale=scale)


OVERLAP_MESSAGE = "refer to a single memory location"


def assert_overlap_error_like_cpu(fn):
    """fn(device) writes into memory it also reads: the CPU refuses; npu must raise the same error."""
    import pytest

    with pytest.raises(RuntimeError, match=OVERLAP_MESSAGE):
        fn("cpu")
    with pytest.raises(RuntimeError, match=OVERLAP_MESSAGE):
        fn("npu")
        torch.npu.synchronize()

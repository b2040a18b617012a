"""The asynchronous execution engine: ops without an npu kernel run through the generic executor
(outputs inferred by the op's Meta kernel, the CPU kernel queued on the current npu stream over
zero-copy views of device memory), which `torch.npu.op_stats()` records. Every result is checked
against the same computation on the CPU, over several dtypes and layouts (empty, 0-d, broadcast,
transposed, sliced), in-place and out= forms, many queued launches, two streams, random ops and
autograd. Task errors, launch modes and strict mode are in test_engine_errors.py."""

import os
import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from engine_util import (
    ALL, FLOATS, LAYOUTS, _flag, _idx, _inputs, _make, assert_matches, pytestmark,
)  # noqa: F401

# ---------------------------------------------------------------------------------------------------
# 1. the generic executor over ops that have no npu adapter, against the CPU

# name -> (fn of a [4, 6] tensor, dtypes). Extra operands are built on the input's device.
UNARY_OPS = {
    "sort": (lambda x: tuple(torch.sort(x, dim=1, stable=True)), ALL),
    "sort_descending_dim0": (lambda x: tuple(torch.sort(x, dim=0, descending=True, stable=True)), ALL),
    "cumsum": (lambda x: torch.cumsum(x, 1), ALL),
    "cumsum_dtype": (lambda x: torch.cumsum(x, 0, dtype=torch.float64), ALL),
    "topk": (lambda x: tuple(torch.topk(x, 3, dim=1, sorted=True)), FLOATS + [torch.int64]),
    "topk_smallest_dim0": (lambda x: torch.topk(x, 2, dim=0, largest=False).values,
                           FLOATS + [torch.int64]),
    "unique": (lambda x: tuple(torch.unique(x, sorted=True, return_counts=True)), ALL),
    "unique_inverse_dim": (lambda x: tuple(torch.unique(x, dim=0, return_inverse=True)),
                           [torch.float32, torch.int64]),
    "nonzero": (lambda x: torch.nonzero(x), ALL),
    "nonzero_as_tuple": (lambda x: torch.nonzero(x, as_tuple=True), ALL),
    "masked_select": (lambda x: torch.masked_select(x, _idx(x, [True, False, True, True, False, True])),
                      ALL),
    "argmax": (lambda x: (torch.argmax(x, dim=1), torch.argmax(x)), FLOATS + [torch.int64]),
    "argmin_keepdim": (lambda x: torch.argmin(x, dim=0, keepdim=True), FLOATS + [torch.int64]),
    "softmax": (lambda x: torch.softmax(x, dim=1), FLOATS),
    "log_softmax": (lambda x: F.log_softmax(x, dim=0), FLOATS),
    "softmax_to_float": (lambda x: torch.softmax(x, dim=1, dtype=torch.float32), FLOATS),
    "matmul": (lambda x: x @ x.transpose(0, 1), FLOATS + [torch.int64]),
    "matmul_vec": (lambda x: x.transpose(0, 1) @ x[:, 0], FLOATS + [torch.int64]),
    "bmm": (lambda x: torch.bmm(x.reshape(2, 2, 6), x.reshape(2, 6, 2)), FLOATS + [torch.int64]),
    "addmm": (lambda x: torch.addmm(x[:, :4], x, x.transpose(0, 1)[:, :4], beta=0.5, alpha=2),
              [torch.float32, torch.bfloat16]),
    "layer_norm": (lambda x: F.layer_norm(x, (6,), torch.linspace(0.5, 2, 6, device=x.device).to(x.dtype),
                                          torch.linspace(-1, 1, 6, device=x.device).to(x.dtype)), FLOATS,
                   # on npu it decomposes (math_native_layer_norm -> native_batch_norm): not fused
                   dict(atol=1e-2, rtol=1e-2)),
    "index_select": (lambda x: x.index_select(1, _idx(x, [5, 0, 0, 3])), ALL),
    "gather": (lambda x: x.gather(1, _idx(x, [[0, 5], [1, 1], [4, 2], [3, 0]])), ALL),
    "scatter": (lambda x: x.scatter(0, _idx(x, [[3, 2, 1, 0, 1, 2]]), x[1:2].flip(1)), ALL),
    "scatter_add": (lambda x: x.scatter_add(1, _idx(x, [[0, 0], [5, 5], [1, 2], [3, 3]]), x[:, :2]),
                    [torch.float32, torch.int64]),
    "index_put": (lambda x: x.index_put((_idx(x, [0, 3, 3]), _idx(x, [1, 5, 5])), x[1, :3],
                                        accumulate=True), [torch.float32, torch.int64]),
    "advanced_index": (lambda x: x[_idx(x, [3, 0, 3]), 1:], ALL),
    "cat": (lambda x: torch.cat([x, x[:2], x.flip(0)], dim=0), ALL),
    "cat_dim1": (lambda x: torch.cat([x, x[:, :1]], dim=1), ALL),
    "stack": (lambda x: torch.stack([x, x.flip(1)], dim=1), ALL),
    "where": (lambda x: torch.where(x > 0, x, x.flip(0)) if x.dtype != torch.bool
              else torch.where(x, x.flip(0), x), ALL),
    "masked_fill": (lambda x: x.masked_fill(_idx(x, [True, False, True, False, False, True]),
                                            True if x.dtype == torch.bool else 3), ALL),
    "comparisons": (lambda x: (x > x.flip(0), x <= x[0], x == x.flip(1), x != 1), ALL),
    "logical": (lambda x: (torch.logical_and(x, x.flip(0)), torch.logical_or(x, x.flip(1)),
                           torch.logical_xor(x, x[0]), torch.logical_not(x)), ALL),
    "bitwise_and_any_all": (lambda x: (x.bool() & x.flip(0).bool(), x.bool().any(dim=1), x.bool().all()), ALL),
    "var_std": (lambda x: (x.var(dim=1), x.std(dim=0, correction=0), x.var()), FLOATS),
    "var_mean": (lambda x: tuple(torch.var_mean(x, dim=1, keepdim=True)), FLOATS),
    "sum_mean_prod": (lambda x: (x.sum(dim=0), x.mean(dim=1), x.prod(dim=1)), FLOATS),
    "max_min_dim": (lambda x: (tuple(x.max(dim=1)), tuple(x.min(dim=0)), x.amax(), x.max()),
                    FLOATS + [torch.int64]),
    "clamp_abs_neg": (lambda x: (x.clamp(-1, 1), x.abs(), -x), FLOATS + [torch.int64]),
    "elementwise_math": (lambda x: (x.exp(), x.sin(), torch.sigmoid(x), F.gelu(x), x.relu()), FLOATS),
    "mixed_dtype_promotion": (lambda x: (x + torch.ones(6, device=x.device, dtype=torch.float64),
                                         x * 2.5, x.to(torch.int32) + 1), FLOATS + [torch.int64]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", UNARY_OPS)
def test_generic_op_matches_cpu(name, layout):
    fn, dtypes, *low_precision_tol = UNARY_OPS[name] + ({},)
    for dtype in dtypes:
        cpu, npu = _inputs((4, 6), dtype, layout)
        expected = fn(cpu)
        got = fn(npu)
        tol = low_precision_tol[0] if dtype in (torch.float16, torch.bfloat16) else {}
        assert_matches(got, expected, exact=dtype in (torch.int64, torch.bool), **tol)
        assert npu.device.type == "npu"  # the input is untouched and still usable
        assert torch.equal(npu.cpu(), cpu)


def test_linalg_det_matches_cpu():
    for dtype in (torch.float32, torch.float64):
        for layout in LAYOUTS:
            cpu, npu = _inputs((3, 5, 5), dtype, layout)
            assert_matches(torch.linalg.det(npu), torch.linalg.det(cpu), atol=1e-5, rtol=1e-5)
        singular = torch.ones(4, 4, dtype=dtype)
        assert_matches(torch.linalg.det(singular.npu()), torch.linalg.det(singular))
        empty_batch = torch.empty(0, 3, 3, dtype=dtype)
        assert_matches(torch.linalg.det(empty_batch.npu()), torch.linalg.det(empty_batch))
        a = torch.randn(6, 6, dtype=dtype)
        assert_matches(torch.linalg.det(a.npu()), torch.linalg.det(a), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
def test_conv2d_max_pool2d_forward_and_backward_match_cpu(dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9).to(dtype)
    w = torch.randn(4, 3, 3, 3).to(dtype)
    b = torch.randn(4).to(dtype)
    results = {}
    for dev in ("cpu", "npu"):
        xd, wd, bd = (t.clone().to(dev).requires_grad_() for t in (x, w, b))
        y = F.conv2d(xd, wd, bd, stride=1, padding=1)
        z = F.max_pool2d(y, kernel_size=2, stride=2)
        zi, idx = F.max_pool2d(y.detach(), 3, stride=2, padding=1, return_indices=True)
        (z * torch.arange(z.numel(), device=dev).reshape(z.shape).to(dtype)).sum().backward()
        results[dev] = (y, z, zi, idx, xd.grad, wd.grad, bd.grad)
    tol = dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else dict(atol=0.2, rtol=0.05)
    for got, expected in zip(results["npu"], results["cpu"]):
        assert_matches(got.detach(), expected.detach(), **tol)


def test_conv2d_channels_last_and_transposed_input():
    torch.manual_seed(1)
    x = torch.randn(2, 3, 7, 7)
    w = torch.randn(5, 3, 3, 3)
    for prep in (lambda t: t.contiguous(memory_format=torch.channels_last),
                 lambda t: t.transpose(2, 3)):
        expected = F.conv2d(prep(x), w, stride=2, dilation=1, groups=1)
        got = F.conv2d(prep(x.npu()), w.npu(), stride=2)
        assert_matches(got, expected, atol=1e-5, rtol=1e-5)


def test_embedding_forward_and_backward_match_cpu():
    weight = torch.randn(10, 4)
    idx = torch.tensor([[1, 2, 1], [9, 0, 1]])
    grads = {}
    for dev in ("cpu", "npu"):
        w = weight.clone().to(dev).requires_grad_()
        out = F.embedding(idx.to(dev), w, padding_idx=0)
        out.pow(2).sum().backward()
        grads[dev] = (out.detach(), w.grad)
    assert_matches(grads["npu"], grads["cpu"])
    # a half weight, and an empty index list
    wh = weight.half()
    assert_matches(F.embedding(idx.npu(), wh.npu()), F.embedding(idx, wh))
    empty = torch.empty(0, dtype=torch.long)
    assert_matches(F.embedding(empty.npu(), weight.npu()), F.embedding(empty, weight))


def test_layer_norm_forward_and_backward_match_cpu():
    torch.manual_seed(0)
    x, w, b = torch.randn(3, 4, 6), torch.randn(6), torch.randn(6)
    results = {}
    for dev in ("cpu", "npu"):
        # every input needs grad: native_layer_norm_backward computes all three (see the xfail below)
        xd, wd, bd = (t.clone().to(dev).requires_grad_() for t in (x, w, b))
        y = F.layer_norm(xd, (6,), wd, bd, eps=1e-3)
        (y * torch.linspace(-1, 1, 6, device=dev)).sum().backward()
        results[dev] = (y.detach(), xd.grad, wd.grad, bd.grad)
    assert_matches(results["npu"], results["cpu"], atol=1e-5, rtol=1e-5)


# Empty and 0-d inputs: name -> fn of a tensor
SHAPE_EDGE_OPS = {
    "cumsum": lambda x: torch.cumsum(x, 0),
    "sort": lambda x: tuple(torch.sort(x, 0)),
    "sum": lambda x: x.sum(),
    "mean_dim": lambda x: x.mean(dim=0),
    "softmax": lambda x: torch.softmax(x, 0),
    "argmax": lambda x: torch.argmax(x),
    "nonzero": lambda x: torch.nonzero(x),
    "unique": lambda x: tuple(torch.unique(x, return_counts=True)),
    "masked_select": lambda x: torch.masked_select(x, x > 0),
    "where": lambda x: torch.where(x > 0, x, torch.zeros((), device=x.device)),
    "cat": lambda x: torch.cat([x.reshape(-1), x.reshape(-1)]),
    "stack": lambda x: torch.stack([x, x]),
    "comparison": lambda x: (x > 0, x == x),
    "exp_mul": lambda x: x.exp() * 2,
    "var": lambda x: x.var(correction=0),
}


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (3, 0), (1,)], ids=str)
@pytest.mark.parametrize("name", SHAPE_EDGE_OPS)
def test_generic_op_on_empty_and_0d_inputs(name, shape):
    fn = SHAPE_EDGE_OPS[name]
    x = torch.randn(shape)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # var of an empty tensor: degrees of freedom <= 0
            expected = fn(x)
    except (RuntimeError, IndexError) as e:  # e.g. argmax of an empty tensor: the same error
        with pytest.raises(type(e), match=re.escape(str(e).splitlines()[0])):
            fn(x.npu())
            torch.npu.synchronize()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fn(x.npu())
    assert_matches(got, expected)


BINARY_OPS = {
    "add": lambda a, b: a + b,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: torch.maximum(a, b),
    "gt": lambda a, b: a > b,
    "where": lambda a, b: torch.where(a > b, a, b),
    "atan2": lambda a, b: torch.atan2(a, b),
    "matmul": lambda a, b: a @ b.transpose(-1, -2),
}


BROADCAST_SHAPES = [((4, 1, 6), (3, 6)), ((6,), (5, 6)), ((), (2, 6)), ((2, 3, 6), (1, 6)),
                    ((0, 6), (1, 6))]


@pytest.mark.parametrize("name,shapes", [
    (name, shapes) for name in BINARY_OPS for shapes in BROADCAST_SHAPES
    if name != "matmul" or len(shapes[0]) >= 1  # matmul needs a matrix or vector on the left
], ids=str)
def test_generic_binary_op_broadcasts_like_cpu(name, shapes):
    fn = BINARY_OPS[name]
    a, b = _make(shapes[0], torch.float32, 1), _make(shapes[1], torch.float32, 2)
    assert_matches(fn(a.npu(), b.npu()), fn(a, b), atol=1e-5, rtol=1e-5)


def test_npu_op_with_0d_cpu_tensor_and_python_scalars():
    a = torch.randn(3, 4)
    s = torch.tensor(1.5, dtype=torch.float64)  # a 0-d CPU tensor is accepted, as on CUDA
    assert_matches(a.npu() * s, a * s)
    assert_matches(torch.where(a.npu() > 0, a.npu(), s), torch.where(a > 0, a, s))
    assert_matches(a.npu().to(torch.int64) + True, a.to(torch.int64) + True)


def test_npu_op_with_non_scalar_cpu_tensor_raises():
    with pytest.raises(RuntimeError, match="same device"):
        torch.randn(3, device="npu") + torch.randn(3)


def test_generic_result_is_on_the_input_device():
    a = torch.randn(5, 3)
    for dev in ("npu:1", "npu:5"):
        got = torch.sort(a.to(dev), dim=0)
        assert got.values.device == torch.device(dev) and got.indices.device == torch.device(dev)
        assert_matches(tuple(got), tuple(torch.sort(a, dim=0)))
        assert_matches(torch.nonzero(a.to(dev) > 0), torch.nonzero(a > 0))
        assert torch.nonzero(a.to(dev)).device == torch.device(dev)


# --- in-place and out= forms


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inplace_ops_on_views_match_cpu(layout):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        cpu, npu = _inputs((4, 6), dtype, layout)
        other_cpu, other_npu = _inputs((6,), dtype, "contiguous", seed=3)
        for t, o in ((cpu, other_cpu), (npu, other_npu)):
            r1 = t.add_(o, alpha=2)   # broadcast operand
            r2 = t.mul_(3)
            r3 = t.clamp_(-5, 5)
            t[1:3].sub_(t[0])          # in place on a view of the view
            t.t()[0].neg_()
            assert r1 is t and r2 is t and r3 is t
        assert_matches(npu, cpu, exact=True)


def test_inplace_op_updates_base_through_view_and_keeps_identity():
    a = torch.randn(5, 8)
    cpu, npu = a.clone(), a.npu()
    ptr = npu.data_ptr()
    for t in (cpu, npu):
        v = t[:, ::3]
        v.add_(1).mul_(torch.arange(3, device=t.device))
        t.diagonal().clamp_(min=0)
        t.masked_fill_(t < -1, -1)
        t.index_put_((torch.tensor([0, 4], device=t.device),), torch.tensor(9.0, device=t.device))
        t.scatter_(1, torch.tensor([[7], [6], [5], [4], [3]], device=t.device), 0.5)
    assert npu.data_ptr() == ptr
    assert_matches(npu, cpu, exact=True)


def test_inplace_broadcast_to_larger_shape_raises_like_cpu():
    a, b = torch.randn(3), torch.randn(2, 3)
    for fn in (lambda x, y: x.atan2_(y), lambda x, y: x.lerp_(y, 0.5)):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(a.clone(), b)
        x = a.npu()
        with pytest.raises(RuntimeError) as npu_err:
            fn(x, b.npu())  # the Meta kernel rejects it at the launching line
        assert "doesn't match the broadcast shape" in str(cpu_err.value)
        assert "doesn't match the broadcast shape" in str(npu_err.value)
        assert torch.equal(x.cpu(), a)  # untouched


def test_out_variants_match_cpu():
    a, b = torch.randn(4, 5), torch.randn(5)
    for make_out in (
        lambda dev: torch.empty(4, 5, device=dev),              # right shape
        lambda dev: torch.empty(0, device=dev),                 # empty: resized silently
        lambda dev: torch.empty(2, 3, device=dev),              # wrong shape: resized (with a warning)
        lambda dev: torch.empty(30, device=dev)[:7],            # wrong shape, a view
        lambda dev: torch.empty(5, 4, device=dev).t(),          # right shape, transposed
        lambda dev: torch.empty(4, 5, dtype=torch.float64, device=dev),  # a wider dtype
    ):
        outs = {}
        for dev, x, y in (("cpu", a, b), ("npu", a.npu(), b.npu())):
            o = make_out(dev)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "An output with one or more elements was resized"
                ret = torch.add(x, y, alpha=3, out=o)
            assert ret is o
            outs[dev] = o
        assert outs["npu"].shape == outs["cpu"].shape == (4, 5)
        assert outs["npu"].stride() == outs["cpu"].stride()
        assert_matches(outs["npu"], outs["cpu"], exact=True)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_out_variants_of_reductions_sort_and_cat_match_cpu():
    a = torch.randn(4, 6)
    x = a.npu()
    v, i = torch.empty(1, device="npu"), torch.empty(1, dtype=torch.long, device="npu")
    ret = torch.sort(x, dim=1, stable=True, out=(v, i))
    assert ret[0] is v and ret[1] is i
    assert_matches((v, i), tuple(torch.sort(a, dim=1, stable=True)))
    o = torch.empty(0, device="npu")
    assert torch.cumsum(x, 0, out=o) is o
    assert_matches(o, torch.cumsum(a, 0))
    o = torch.empty(0, device="npu")
    torch.cat([x, x], dim=1, out=o)
    assert_matches(o, torch.cat([a, a], dim=1))
    o = torch.empty(0, device="npu")
    torch.matmul(x, x.t(), out=o)
    assert_matches(o, a @ a.t(), atol=1e-5, rtol=1e-5)
    o = torch.empty(0, dtype=torch.long, device="npu")
    torch.nonzero(x > 0, out=o)
    assert_matches(o, torch.nonzero(a > 0))
    o = torch.empty(3, device="npu")
    torch.sum(x, 1, out=o[:0])  # an empty view as out
    torch.sum(x, 1, out=o.resize_(4))
    assert_matches(o, a.sum(1), atol=1e-6, rtol=1e-6)


def test_out_on_other_device_raises():
    with pytest.raises(RuntimeError):
        torch.add(torch.randn(3, device="npu"), 1, out=torch.empty(3, device="npu:1"))
        torch.npu.synchronize()


@pytest.mark.xfail(reason="KNOWN GAP: an out= tensor that must be resized takes the layout the op's "
                          "Meta kernel gives it, and for these ops the Meta kernels (Python refs) resize "
                          "out= contiguously while the eager CPU kernels give it the input's memory format "
                          "(channels_last); the generic executor can only follow the Meta kernel until "
                          "these ops have npu kernels",
                   strict=True)
def test_resized_out_takes_the_layout_of_the_cpu_kernel():
    x = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    for fn in (lambda t: torch.logical_not(t),
               lambda t: torch.logical_and(t, t),
               lambda t: torch.maximum(t, t, out=torch.empty(0, device=t.device)),
               lambda t: torch.atan2(t, t, out=torch.empty(0, device=t.device))):
        expected, got = fn(x), fn(x.npu())
        assert_matches(got, expected, exact=True)
        assert got.stride() == expected.stride(), (got.stride(), expected.stride())
        assert got.is_contiguous(memory_format=torch.channels_last)


def test_elementwise_ops_keep_the_memory_format_like_cpu():
    x = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    for fn, exact in ((lambda t: t + 1, True), (lambda t: -t, True), (lambda t: t.clamp(-1, 1), True),
                      (torch.sigmoid, False),  # a device op: its own exp, within float rounding
                      (lambda t: t.half(), True), (lambda t: t > 0, True)):
        expected, got = fn(x), fn(x.npu())
        assert_matches(got, expected, exact=exact)
        assert got.stride() == expected.stride()


# --- boolean-mask indexing: in a child process, as it changes how aten::index runs for the whole
# process (see the xfail below), which would move other tests' index errors to the launching line

_BOOL_MASK_CHILD = """
import json
import torch

torch.manual_seed(0)
ok = []
for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool):
    base = (torch.randn(4, 13) * 3).to(dtype)
    for view in (lambda b: b[:, :6], lambda b: b[:, 1::2], lambda b: b[:, :4].t()):
        cpu, npu = view(base), view(base.npu())
        row_mask = torch.arange(cpu.shape[0]) % 2 == 0
        full_mask = torch.arange(cpu.numel()).reshape(cpu.shape) % 3 == 0
        for got, expected in ((npu[row_mask.npu()], cpu[row_mask]),
                              (npu[full_mask.npu()], cpu[full_mask]),
                              (npu[row_mask.npu(), 1:], cpu[row_mask, 1:]),
                              (npu[torch.zeros_like(full_mask).npu()], cpu[torch.zeros_like(full_mask)])):
            ok.append(got.device.type == "npu" and got.dtype == expected.dtype
                      and torch.equal(got.cpu(), expected))
x = torch.randn(8, device="npu")
torch.npu.synchronize()
torch.npu.op_stats(reset=True)
x[torch.tensor([1, 2]).npu()]  # integer indices: no data-dependent output shape
print(json.dumps({"values_ok": ok, "int_index_stats": torch.npu.op_stats()["aten::index.Tensor_out"]}))
"""


@pytest.fixture(scope="module")
def bool_mask_child(tmp_path_factory):
    import json
    import subprocess
    import sys
    from conftest import _CONTROL_VARS
    env = {k: v for k, v in os.environ.items() if k not in _CONTROL_VARS}
    env.update({"NPU_SIM_STRICT": "0", "TASK_QUEUE_ENABLE": "1", "ASCEND_LAUNCH_BLOCKING": "0"})
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", _BOOL_MASK_CHILD], cwd=tmp_path_factory.mktemp("child"),
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bool_mask_index_matches_cpu(bool_mask_child):
    assert len(bool_mask_child["values_ok"]) == 60
    assert all(bool_mask_child["values_ok"]), bool_mask_child["values_ok"]


def test_int_index_stays_queued_after_a_bool_mask_index(bool_mask_child):
    stats = bool_mask_child["int_index_stats"]
    assert stats["generic"] == 1 and stats["generic_inline"] == 0, stats


# --- how ops ran: op_stats


def test_op_stats_records_generic_and_generic_inline_paths():
    x = torch.randn(4, 5, device="npu")
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    assert torch.npu.op_stats() == {}
    torch.cumsum(x, 0)
    torch.cumsum(x, 1)
    torch.nonzero(x)
    torch.unique(x)
    x.masked_select(x > 0)
    torch.sort(x)
    stats = torch.npu.op_stats()
    assert set(stats["aten::cumsum.out"]) == {"device_op", "generic", "generic_inline", "fallback"}
    assert stats["aten::cumsum.out"] == {"device_op": 0, "generic": 2, "generic_inline": 0, "fallback": 0}
    assert stats["aten::nonzero"] == {"device_op": 0, "generic": 0, "generic_inline": 1, "fallback": 0}
    assert stats["aten::_unique2"]["generic_inline"] == 1
    assert stats["aten::masked_select"]["generic_inline"] == 1
    assert stats["aclnnGtScalar"]["device_op"] == 1  # x > 0 has a named device op
    assert stats["aten::sort.values_stable"]["generic"] == 1
    assert all(v["fallback"] == 0 for v in stats.values()), stats  # default mode: no CPU fallback
    # reset=True returns the counts, then clears them
    again = torch.npu.op_stats(reset=True)
    assert again == stats
    assert torch.npu.op_stats() == {}
    torch.cumsum(x, 0)
    assert torch.npu.op_stats()["aten::cumsum.out"]["generic"] == 1


def test_op_stats_views_and_non_tensor_results():
    x = torch.randn(4, 6, device="npu")
    torch.npu.op_stats(reset=True)
    v = x.unfold(1, 2, 2)  # a view op without an npu kernel: replayed as an npu view
    assert v._base is x or v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert x.equal(x.clone())  # a bool result: needs the values now
    stats = torch.npu.op_stats()
    assert stats["aten::unfold"]["generic"] == 1
    assert stats["aten::equal"]["generic_inline"] == 1

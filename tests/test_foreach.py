"""The _foreach_* ops torch.optim runs, as one device op per tensor list, against the CPU (PyTorch's
per-tensor loop there), and the optimizers' foreach paths end to end."""

import pytest
import torch

SHAPES = [(3, 5), (7,), (), (0, 4), (300, 300)]  # the last one is split across the thread pool


def _lists(dtype, count=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [[(torch.rand(s, generator=g) + 0.5).to(dtype) for s in SHAPES] for _ in range(count)]


def _npu(lists):
    return [[t.npu() for t in ts] for ts in lists]


def _close(actual, expected, dtype):
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    for a, e in zip(actual, expected):
        assert a.device.type == "npu" and a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e, rtol=tol, atol=tol)


CASES = {
    "add_list_": lambda x, y, z: torch._foreach_add_(x, y, alpha=-0.5),
    "add_list": lambda x, y, z: torch._foreach_add(x, y, alpha=2),
    "add_scalar_": lambda x, y, z: torch._foreach_add_(x, 1e-3),
    "mul_scalar_": lambda x, y, z: torch._foreach_mul_(x, 0.9),
    "mul_scalar": lambda x, y, z: torch._foreach_mul(x, -3),
    "div_scalarlist_": lambda x, y, z: torch._foreach_div_(x, [0.5 + i for i in range(len(x))]),
    "sqrt": lambda x, y, z: torch._foreach_sqrt(x),
    "sqrt_": lambda x, y, z: torch._foreach_sqrt_(x),
    "lerp_small_": lambda x, y, z: torch._foreach_lerp_(x, y, 0.1),
    "lerp_large_": lambda x, y, z: torch._foreach_lerp_(x, y, 0.75),
    "addcmul_": lambda x, y, z: torch._foreach_addcmul_(x, y, z, 1 - 0.999),
    "addcdiv_scalarlist_": lambda x, y, z: torch._foreach_addcdiv_(x, y, z, [-0.01 * (i + 1) for i in range(len(x))]),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_matches_cpu_in_one_launch(case, dtype):
    cpu = _lists(dtype)
    npu = _npu(cpu)
    expected = CASES[case](*cpu)
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    actual = CASES[case](*npu)
    torch.npu.synchronize()
    stats = torch.npu.op_stats()
    foreach_ops = {k: v for k, v in stats.items() if k.startswith("aclnnForeach")}
    assert sum(v["device_op"] for v in foreach_ops.values()) == 1, stats  # one launch for the list
    if expected is None:  # in place: the first list is the result
        expected, actual = cpu[0], npu[0]
    _close(actual, expected, dtype)


def test_lists_the_device_op_does_not_take_run_per_tensor():
    x = [torch.rand(4, 4), torch.rand(4, 4, dtype=torch.float64), torch.rand(5, 3).t()]
    y = [torch.rand(4, 4), torch.rand(4, 4, dtype=torch.float64), torch.rand(3, 5)]
    xn, yn = [t.npu() for t in x], [t.npu() for t in y]
    assert not xn[2].is_contiguous()  # .npu() keeps the transposed layout
    torch._foreach_add_(x, y, alpha=3)
    torch._foreach_add_(xn, yn, alpha=3)
    for a, e in zip(xn, x):
        torch.testing.assert_close(a.cpu(), e)
    ints = [torch.arange(5)]
    torch._foreach_mul_(ints, 3)
    ints_n = [torch.arange(5).npu()]
    torch._foreach_mul_(ints_n, 3)
    torch.testing.assert_close(ints_n[0].cpu(), ints[0])


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="must have the same number of tensors, got 1 and 2"):  # as CPU
        torch._foreach_add_([torch.ones(2).npu()], [torch.ones(2).npu(), torch.ones(2).npu()])
    with pytest.raises(RuntimeError):
        torch._foreach_add_([torch.ones(2).npu()], [torch.ones(3).npu()])


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True),
    lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=True),
    lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.01, foreach=True),
])
def test_optimizers_foreach_path_matches_cpu(make_opt):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model_n = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
    model_n.load_state_dict(model.state_dict())
    opt, opt_n = make_opt(model.parameters()), make_opt(model_n.parameters())
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    for _ in range(4):
        for m, o, xx, yy in ((model, opt, x, y), (model_n, opt_n, x.npu(), y.npu())):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(xx), yy).backward()
            o.step()
    for p, pn in zip(model.parameters(), model_n.parameters()):
        torch.testing.assert_close(pn.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-5)

"""Compiled npu graphs and private storage formats: inputs held in NC1HWC0 / FRACTAL_Z / FRACTAL_NZ are
converted to their base format in place on the call, npu ops inside the graph return base formats
even under allow_internal_format, and npu_format_cast inside a graph is a copy. Results are checked
against the same code run eagerly on the CPU."""

import pytest
import torch
import torch._inductor.config
import torch.nn as nn

import torch_npu
from torch_npu import Format

from formats.reference import internal_format

NPU = "npu"


@pytest.fixture(autouse=True, scope="module")
def _compile_in_process():
    with torch._inductor.config.patch(compile_threads=1):
        yield


def compiled(fn, **kwargs):
    torch._dynamo.reset()
    return torch.compile(fn, backend="npu", **kwargs)


def close(actual, expected, atol=1e-4, rtol=1e-4):
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol)


def test_private_format_inputs_are_converted_to_their_base_format_on_the_call():
    x = torch.randn(2, 5, 4, 4)
    w = torch.randn(6, 4)

    def f(x, w):
        return (x.relu() * 2).sum(1) @ w.t()

    xn = torch_npu.npu_format_cast(x.to(NPU), Format.NC1HWC0)
    wn = torch_npu.npu_format_cast(w.to(NPU), Format.FRACTAL_NZ)
    close(compiled(f)(xn, wn), f(x, w))
    # The inputs now hold their base format, with their values.
    assert torch_npu.get_npu_format(xn) == Format.NCHW and torch_npu.get_npu_format(wn) == Format.ND
    close(xn, x)
    close(wn, w)


def test_a_mutated_private_format_input_and_its_views_see_the_update():
    x = torch.randn(2, 5, 3, 3)

    def f(x):
        x.mul_(3)
        return x + 1

    xn = torch_npu.npu_format_cast(x.to(NPU), Format.NC1HWC0)
    view = xn[1]
    out = compiled(f)(xn)
    expected = x * 3
    close(out, expected + 1)
    close(xn, expected)
    close(view, expected[1])


def test_npu_ops_in_a_graph_return_base_formats_under_allow_internal_format():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1))
    npu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 1)).to(NPU)
    npu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 3, 6, 6)
    with internal_format(True):
        # Eager convolution under the switch returns NC1HWC0: the graph's must not.
        assert torch_npu.get_npu_format(npu[0](x.to(NPU))) == Format.NC1HWC0
        out = compiled(npu)(x.to(NPU))
        assert torch_npu.get_npu_format(out) == Format.NCHW
        close(out, cpu(x), atol=1e-4, rtol=1e-4)
        # The switch is as the user left it once the call returns.
        assert torch.npu.config.allow_internal_format is True
        assert torch_npu.get_npu_format(npu[0](x.to(NPU))) == Format.NC1HWC0


def test_training_step_with_private_format_parameters():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
    npu = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5)).to(NPU)
    npu.load_state_dict(cpu.state_dict())
    npu[0].weight.data = torch_npu.npu_format_cast(npu[0].weight.data, Format.FRACTAL_Z)
    npu[3].weight.data = torch_npu.npu_format_cast(npu[3].weight.data, Format.FRACTAL_NZ)
    x, y = torch.randn(3, 3, 6, 6), torch.randint(0, 5, (3,))
    loss_fn = nn.CrossEntropyLoss()
    ref = loss_fn(cpu(x), y)
    ref.backward()
    with internal_format(True):
        loss = compiled(lambda a, b: loss_fn(npu(a), b))(x.to(NPU), y.to(NPU))
        loss.backward()
    close(loss, ref)
    for p, q in zip(npu.parameters(), cpu.parameters()):
        close(p.grad, q.grad, atol=1e-4, rtol=1e-4)
        close(p, q)


def test_format_cast_inside_a_graph_is_a_copy_of_the_values():
    x = torch.randn(5, 7)

    def f(x):
        return torch_npu.npu_format_cast(x, Format.FRACTAL_NZ) * 2 + 1

    out = compiled(f, fullgraph=True)(x.to(NPU))
    assert torch_npu.get_npu_format(out) == Format.ND
    close(out, x * 2 + 1)

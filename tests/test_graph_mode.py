"""torch.compile(backend="npu"): Inductor's C++ kernels over npu memory, queued on the current stream.

Every compiled result is checked against the same function run eagerly on the CPU (and, for
training, against the CPU's gradients and updated parameters). Graphs are small: Inductor compiles
C++ for each, and its on-disk cache makes reruns fast.
"""

import pytest
import torch
import torch._inductor.config
import torch.nn as nn
import torch.nn.functional as F

import torch_npu  # noqa: F401
from torch_npu.dynamo.backend import compile_stats

NPU = "npu"


@pytest.fixture(autouse=True, scope="module")
def _compile_in_process():
    # Graphs here are small: compiling their few kernels in-process beats starting Inductor's worker pool.
    with torch._inductor.config.patch(compile_threads=1):
        yield


def compiled(fn, **kwargs):
    return torch.compile(fn, backend="npu", **kwargs)


def close(actual, expected, atol=1e-4, rtol=1e-4):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            close(a, e, atol, rtol)
        return
    assert actual.device.type == NPU, actual.device
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol)


def check(fn, *cpu_args, atol=1e-4, rtol=1e-4, **kwargs):
    """fn compiled for npu on copies of cpu_args matches fn run eagerly on the CPU."""
    npu_args = [a.to(NPU) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    close(compiled(fn, **kwargs)(*npu_args), fn(*cpu_args), atol, rtol)


# ---- functions: compiled npu vs eager CPU -----------------------------------------------------------

def test_elementwise_chain():
    def f(x, y):
        return ((x.sin() * y + 1).relu().exp() - x / (y.abs() + 1)).tanh()

    check(f, torch.randn(33, 65), torch.randn(33, 65))


def test_reductions():
    def f(x):
        return x.sum(0), x.amax(1), x.mean(), (x * x).sum(-1).sqrt(), x.argmax(1), x.var(0)

    check(f, torch.randn(37, 129))


def test_matmul_bias_gelu():
    check(lambda x, w, b: F.gelu(x @ w + b), torch.randn(16, 32), torch.randn(32, 24), torch.randn(24))


def test_layer_norm_and_softmax():
    def f(x, w, b):
        h = F.layer_norm(x, (x.shape[-1],), w, b)
        return h.softmax(-1), F.log_softmax(h, 0)

    check(f, torch.randn(8, 48), torch.rand(48), torch.randn(48))


def test_attention():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    check(f, q, k, v)


def test_embedding_and_index():
    def f(idx, table, pos):
        return F.embedding(idx, table) + table[pos].unsqueeze(0)

    check(f, torch.randint(0, 50, (3, 7)), torch.randn(50, 16), torch.arange(7))


def test_conv_bn_relu_module_forward_and_backward():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    npu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).to(NPU)
    npu.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 3, 10, 10)
    out = compiled(npu)(x.to(NPU))
    ref = cpu(x)
    close(out, ref)
    out.square().sum().backward()
    ref.square().sum().backward()
    for p, q in zip(npu.parameters(), cpu.parameters()):
        close(p.grad, q.grad, atol=1e-3, rtol=1e-3)
    close(npu[1].running_mean, cpu[1].running_mean)  # the batch statistics update (a mutated buffer)


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.norm = nn.LayerNorm(16)
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 40)

    def forward(self, idx):
        return self.fc2(F.gelu(self.fc1(self.norm(self.emb(idx)))))


def test_training_steps_with_optimizer_match_cpu():
    torch.manual_seed(0)
    cpu = TinyNet()
    npu = TinyNet().to(NPU)
    npu.load_state_dict(cpu.state_dict())
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    opt_npu = torch.optim.AdamW(npu.parameters(), lr=1e-2)
    model = compiled(npu)
    idx, target = torch.randint(0, 40, (4, 6)), torch.randint(0, 40, (24,))
    for _ in range(3):
        for m, opt, dev in ((model, opt_npu, NPU), (cpu, opt_cpu, "cpu")):
            loss = F.cross_entropy(m(idx.to(dev)).reshape(-1, 40), target.to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for p, q in zip(npu.parameters(), cpu.parameters()):
        close(p, q, atol=1e-4, rtol=1e-3)


def test_whole_training_step_compiled_including_the_optimizer():
    torch.manual_seed(0)
    cpu = nn.Linear(8, 4)
    npu = nn.Linear(8, 4).to(NPU)
    npu.load_state_dict(cpu.state_dict())

    def make_step(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        return step

    step_npu, step_cpu = compiled(make_step(npu)), make_step(cpu)
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    for _ in range(3):
        close(step_npu(x.to(NPU), y.to(NPU)), step_cpu(x, y))
    close(npu.weight, cpu.weight)


def test_dynamic_shapes_compile_once():
    def f(x, w):
        return F.silu(x @ w).sum(-1) + x.mean(-1)

    fn = compiled(f, dynamic=True)
    w = torch.randn(12, 12)
    before = compile_stats.graphs
    for rows in (3, 5, 9):
        x = torch.randn(rows, 12)
        close(fn(x.to(NPU), w.to(NPU)), f(x, w))
    assert compile_stats.graphs - before == 1


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_modes_are_accepted(mode):
    check(lambda x, w: torch.relu(x @ w) * 2, torch.randn(8, 16), torch.randn(16, 8), mode=mode)


def test_recompiles_for_another_device_index():
    if torch.npu.device_count() < 2:
        pytest.skip("needs two npu devices")
    fn = compiled(lambda x: x * 3 + 1)
    x = torch.randn(10)
    before = compile_stats.graphs
    close(fn(x.to("npu:0")), x * 3 + 1)
    out1 = fn(x.to("npu:1"))
    assert out1.device == torch.device("npu:1")
    close(out1, x * 3 + 1)
    assert compile_stats.graphs - before == 2


# ---- fallbacks and bad input ----------------------------------------------------------------------

def test_op_without_a_lowering_runs_as_the_eager_npu_kernel_inside_the_graph():
    # Inductor has no lowering for cdist: it stays an op of the graph and runs on npu.
    torch.npu.op_stats(reset=True)
    check(lambda a, b: torch.cdist(a, b).relu() + 1, torch.randn(5, 3), torch.randn(4, 3))
    ran = {name for name, counts in torch.npu.op_stats().items() if sum(counts.values())}
    assert any("cdist" in name for name in ran), sorted(ran)


def test_mixing_npu_and_cpu_tensors_raises_the_usual_error():
    fn = compiled(lambda a, b: a + b)
    with pytest.raises(Exception, match="device"):
        fn(torch.randn(4, device=NPU), torch.randn(4))


def test_npu_custom_op_in_a_compiled_graph_runs_on_npu():
    def f(x, g):
        return torch_npu.npu_rms_norm(x * 2, g)[0].relu()

    x, g = torch.randn(4, 8), torch.rand(8)
    ref = torch_npu.npu_rms_norm((x * 2).to(NPU), g.to(NPU))[0].relu().cpu()
    close(compiled(f, fullgraph=True)(x.to(NPU), g.to(NPU)), ref)


# ---- stream order and errors ----------------------------------------------------------------------

def test_compiled_call_returns_before_its_work_runs():
    from conftest import stall_stream

    fn = compiled(lambda x: (x * 2).exp().sum(0))
    x = torch.randn(64, 32)
    xn = x.to(NPU)  # before the stall: a blocking host-to-device copy waits for the stream
    fn(xn)  # compile first
    torch.npu.synchronize()
    stream = torch.npu.current_stream()
    for _ in range(10):  # far longer than the compiled call's host side, even on a loaded machine
        stall_stream()
    out = fn(xn)
    assert not stream.query()  # the host did not wait for the kernel
    close(out, (x * 2).exp().sum(0))


def test_compiled_output_consumed_on_another_stream_after_an_event():
    fn = compiled(lambda x, w: F.relu(x @ w) + 1)
    x, w = torch.randn(32, 16), torch.randn(16, 8)
    side = torch.npu.Stream()
    xs, ws = x.to(NPU), w.to(NPU)
    torch.npu.synchronize()
    from conftest import stall_stream

    with torch.npu.stream(side):
        stall_stream()
        y = fn(xs, ws)  # queued on the side stream
        done = torch.npu.Event()
        done.record(side)
    torch.npu.current_stream().wait_event(done)
    z = y * 2  # eager, on the default stream, after the event
    close(z, (F.relu(x @ w) + 1) * 2)


def test_error_in_compiled_code_surfaces_at_the_next_sync_naming_graph_and_line():
    def lookup(idx, table):
        return (table[idx] * 2).sum(-1)  # the failing source line

    fn = compiled(lookup)
    table = torch.randn(10, 8, device=NPU)
    fn(torch.tensor([1, 2], device=NPU), table)
    torch.npu.synchronize()
    bad = torch.tensor([1, 12], device=NPU)
    out = fn(bad, table)  # queued: returns without raising
    with pytest.raises(RuntimeError) as info:
        torch.npu.synchronize()
    msg = str(info.value)
    assert "index out of bounds" in msg, msg
    assert "compiled kernel cpp_" in msg and "compiled graph" in msg, msg
    assert "test_graph_mode.py:" in msg, msg
    line_of_op = lookup.__code__.co_firstlineno + 1
    assert f"test_graph_mode.py:{line_of_op}" in msg, msg
    assert out.shape == (2,)
    # the device stays usable
    close(fn(torch.tensor([3, 4], device=NPU), table), (table.cpu()[[3, 4]] * 2).sum(-1))


def test_npu_streams_inside_a_compiled_function():
    side = torch.npu.Stream()

    def f(x):
        y = x * 2
        side.wait_stream(torch.npu.current_stream())  # stream calls run between graphs (graph breaks)
        with torch.npu.stream(side):
            z = (y + 1).exp()
        torch.npu.current_stream().wait_stream(side)
        return z.sum() + y.mean()

    x = torch.randn(64)
    close(compiled(f)(x.to(NPU)), ((x * 2 + 1).exp().sum() + (x * 2).mean()))

"""The CPU fallback: ops without npu kernels run on the host with CPU-equal results, warn once per op,
and raise NotImplementedError when NPU_SIM_FALLBACK=0."""

import pytest
import torch

OPS = {
    "sort_values": lambda x: torch.sort(x, dim=1).values,
    "sort_indices": lambda x: torch.sort(x, dim=1, stable=True).indices,
    "cumsum": lambda x: torch.cumsum(x, 0),
    "matmul": lambda x: x @ x.t(),
    "relu": lambda x: torch.nn.functional.relu(x),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "sum_dim": lambda x: x.sum(dim=1),
    "mean": lambda x: x.mean(),
    "argmax": lambda x: x.argmax(dim=0),
    "topk": lambda x: torch.topk(x, 2, dim=1).values,
    "where": lambda x: torch.where(x > 0, x, -x),
    "cat": lambda x: torch.cat([x, x * 2], dim=0),
    "stack": lambda x: torch.stack([x, -x]),
    "index_select": lambda x: x.index_select(1, torch.tensor([3, 0, 2], device=x.device)),
    "gather": lambda x: x.gather(1, torch.tensor([[0, 1], [2, 3], [4, 0], [1, 1]], device=x.device)),
    "masked_fill": lambda x: x.masked_fill(x < 0, 0.0),
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "pow_exp_log": lambda x: (x.abs() + 1).log() + x.exp() ** 2,
    "comparison": lambda x: (x > 0.1) & (x < 0.9),
    "transposed_input": lambda x: x.t().contiguous() * 2 + x.t(),
    "conv2d": lambda x: torch.nn.functional.conv2d(x.reshape(1, 1, 4, 5),
                                                   torch.ones(2, 1, 2, 2, device=x.device)),
    "max_pool": lambda x: torch.nn.functional.max_pool1d(x.unsqueeze(0), 2),
    "nonzero": lambda x: torch.nonzero(x > 0),
    "unique": lambda x: torch.unique((x * 2).round()),
    "linalg_norm": lambda x: torch.linalg.norm(x, dim=1),
    "float16_add": lambda x: x.half() + x.half(),
    "int_ops": lambda x: (x * 10).long() // 3 % 4,
}


@pytest.mark.parametrize("name", OPS)
def test_fallback_op_matches_cpu(name):
    torch.manual_seed(0)
    a = torch.randn(4, 5)
    expected = OPS[name](a)
    got = OPS[name](a.npu())
    assert got.device == torch.device("npu", 0)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected)


def test_fallback_result_stays_on_input_device():
    a = torch.randn(3, 3)
    got = torch.cumsum(a.to("npu:3"), 1)
    assert got.device == torch.device("npu", 3)
    torch.testing.assert_close(got.cpu(), torch.cumsum(a, 1))


def test_fallback_inplace_op_updates_npu_tensor():
    a = torch.randn(4, 5)
    x = a.npu()
    ret = x.add_(1.5)
    assert ret is x
    x.mul_(torch.full((5,), 2.0, device="npu"))
    torch.testing.assert_close(x.cpu(), (a + 1.5) * 2)


def test_fallback_inplace_on_noncontiguous_view_updates_base():
    a = torch.randn(4, 6)
    cpu, npu = a.clone(), a.npu()
    for t in (cpu, npu):
        t.t()[::2].mul_(-3)
        t[:, 1].exp_()
    torch.testing.assert_close(npu.cpu(), cpu)


def test_fallback_out_argument():
    a = torch.randn(4, 5)
    out = torch.empty(4, 5, device="npu")
    ret = torch.cumsum(a.npu(), 1, out=out)
    assert ret is out
    torch.testing.assert_close(out.cpu(), torch.cumsum(a, 1))
    wrong_size = torch.empty(0, device="npu")
    torch.mul(a.npu(), 2, out=wrong_size)
    torch.testing.assert_close(wrong_size.cpu(), a * 2)


def test_fallback_multiple_outputs():
    a = torch.randn(5, 6)
    v, i = torch.max(a.npu(), dim=1)
    ev, ei = torch.max(a, dim=1)
    assert v.device.type == "npu" and i.device.type == "npu"
    assert torch.equal(v.cpu(), ev) and torch.equal(i.cpu(), ei)


def test_fallback_view_ops_return_npu_views():
    a = torch.randn(4, 6)
    cpu, npu = a.clone(), a.npu()
    for t in (cpu, npu):
        t.diagonal(offset=1).fill_(0.0)
        t.narrow(0, 1, 2).select(1, 5).fill_(7.0)
        t.unflatten(1, (2, 3))[:, 1, 2].fill_(-1.0)
        t.movedim(0, 1)[0].fill_(3.0)
    torch.testing.assert_close(npu.cpu(), cpu)


def test_fallback_with_mixed_scalar_and_0d_cpu_tensor():
    a = torch.randn(3)
    torch.testing.assert_close((a.npu() + torch.tensor(2.0)).cpu(), a + 2.0)
    torch.testing.assert_close((a.npu() * 3).cpu(), a * 3)


def test_fallback_results_are_ordered_with_stream_work():
    a = torch.randn(16)
    x = a.npu()
    x.fill_(1.0)  # queued on the stream
    x[::2].zero_()
    y = torch.cumsum(x, 0)  # the host kernel must see the fill/zero results
    c = torch.ones(16)
    c[::2] = 0
    torch.testing.assert_close(y.cpu(), torch.cumsum(c, 0))


def test_fallback_warns_once_per_op_in_subprocess(run_python):
    proc = run_python(
        """
        import warnings
        import torch
        x = torch.randn(6, 6)
        y = x.npu()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            checks = [
                (torch.sort(y, dim=1).values, torch.sort(x, dim=1).values),
                (torch.sort(y, dim=1).values, torch.sort(x, dim=1).values),
                (torch.cumsum(y, 0), torch.cumsum(x, 0)),
                (torch.cumsum(y, 1), torch.cumsum(x, 1)),
                (torch.flip(y, [0]), torch.flip(x, [0])),
                (torch.flip(y, [1]), torch.flip(x, [1])),
                (torch.nn.functional.relu(y), torch.nn.functional.relu(x)),
                (torch.nn.functional.relu(y), torch.nn.functional.relu(x)),
            ]
            results = [(a.cpu(), b) for a, b in checks]
        for a, b in results:
            torch.testing.assert_close(a, b)
        msgs = [str(m.message) for m in w if "is not supported on npu" in str(m.message)]
        for m in w:
            if "is not supported on npu" in str(m.message):
                assert issubclass(m.category, UserWarning), m.category
        for m in msgs:
            assert "it ran on the CPU" in m, m
        for op in ("sort", "cumsum", "flip"):
            hits = [m for m in msgs if m.startswith(f"aten::{op}")]
            assert len(hits) == 1, (op, msgs)
        # relu has a named device op (aclnnRelu): it runs on the device even in strict mode
        assert not any("relu" in m for m in msgs), msgs
        # a different op warns on its first use, too
        with warnings.catch_warnings(record=True) as w2:
            warnings.simplefilter("always")
            torch.cumprod(y, 0)
        assert any("aten::cumprod" in str(m.message) for m in w2), [str(m.message) for m in w2]
        print("OK")
        """,
        env={"NPU_SIM_STRICT": "1"},
    )
    assert proc.stdout.strip().endswith("OK")


def test_fallback_disabled_raises_in_subprocess(run_python):
    proc = run_python(
        """
        import torch
        a = torch.arange(12.0).reshape(3, 4)
        x = a.npu()
        try:
            torch.cumsum(x, 0)
        except NotImplementedError as e:
            assert "aten::cumsum" in str(e), str(e)
            assert "NPU_SIM_FALLBACK" in str(e), str(e)
        else:
            raise AssertionError("cumsum must raise with NPU_SIM_FALLBACK=0")
        torch.testing.assert_close(torch.relu(x).cpu(), torch.relu(a))  # a named device op
        for fn in (lambda: torch.sort(x), lambda: torch.flip(x, [0])):
            try:
                fn()
            except NotImplementedError:
                pass
            else:
                raise AssertionError("fallback ops must raise with NPU_SIM_FALLBACK=0")
        # the native npu kernels keep working: creation, copies, views, fill_, zero_, item
        y = torch.empty(3, 4, device="npu")
        y.copy_(a)
        y.t()[1].fill_(-1.0)
        y[2].zero_()
        ref = a.clone()
        ref.t()[1].fill_(-1.0)
        ref[2].zero_()
        assert torch.equal(y.cpu(), ref)
        assert torch.equal(x.t().to("npu:1").cpu(), a.t())
        assert x[1, 2].item() == a[1, 2].item()
        assert torch.equal(x.to(torch.float16).cpu(), a.half())
        print("OK")
        """,
        env={"NPU_SIM_STRICT": "1", "NPU_SIM_FALLBACK": "0"},
    )
    assert proc.stdout.strip().endswith("OK")

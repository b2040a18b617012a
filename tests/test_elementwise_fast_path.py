"""The small-op launch path of add / sub / mul / div / relu against CPU eager: dtypes, Python numbers
(scalar descriptors, PyTorch's promotion), in-place forms and their errors, layouts, broadcasting,
and the cases that must leave the fast path (mixed dtypes, overlap, other devices)."""

import pytest
import torch

OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=3),
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8, torch.bool]


def _tensor(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).to(dtype)
    return torch.randint(1, 9, shape, generator=g).to(dtype)


def _same(npu_fn, cpu_fn):
    """Both raise the same error, or give the same result (value, dtype, shape and strides)."""
    try:
        expected = cpu_fn()
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as npu_error:
            npu_fn()
        assert str(e).split("\n")[0] in str(npu_error.value), (str(e), str(npu_error.value))
        return
    actual = npu_fn()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    # bfloat16: the device op rounds once, CPU eager may round alpha * other first (one ulp apart).
    tol = dict(rtol=1.6e-2, atol=1e-5) if expected.dtype == torch.bfloat16 else dict(rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_tensor(op, dtype):
    a, b = _tensor((5, 7), dtype, 1), _tensor((5, 7), dtype, 2)
    _same(lambda: OPS[op](a.npu(), b.npu()), lambda: OPS[op](a, b))


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("number", [3, 2.5, True, -0.0])
def test_tensor_and_python_number(op, dtype, number):
    a = _tensor((16,), dtype, 3)
    _same(lambda: OPS[op](a.npu(), number), lambda: OPS[op](a, number))


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("other", ["tensor", 2, 1.5, "row"])
def test_in_place(op, dtype, other):
    a = _tensor((4, 6), dtype, 4)
    if other == "tensor":
        b = _tensor((4, 6), dtype, 5)
    elif other == "row":
        b = _tensor((6,), dtype, 6)  # broadcast to self's shape
    else:
        b = other

    def run(x, y):
        getattr(x, op)(y)
        return x

    _same(lambda: run(a.npu(), b.npu() if isinstance(b, torch.Tensor) else b), lambda: run(a.clone(), b))


def test_in_place_alpha_and_aliasing():
    a = torch.randn(32)
    x = a.npu()
    x.add_(x, alpha=0.5)  # the same view on both sides is fine
    torch.testing.assert_close(x.cpu(), a + 0.5 * a)
    with pytest.raises(RuntimeError, match="single memory location|unsupported operation"):
        x[1:].add_(x[:-1])
    with pytest.raises(RuntimeError, match="unsupported operation|single memory location"):
        a[1:].add_(a[:-1])


@pytest.mark.parametrize("layout", ["channels_last", "transposed", "sliced"])
def test_layouts(layout):
    base_a, base_b = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)
    if layout == "channels_last":
        conv = lambda t: t.contiguous(memory_format=torch.channels_last)  # noqa: E731
    elif layout == "transposed":
        conv = lambda t: t.transpose(1, 3)  # noqa: E731
    else:
        conv = lambda t: t[:, :, ::2]  # noqa: E731
    a, b = conv(base_a), conv(base_b)
    an, bn = conv(base_a.npu()), conv(base_b.npu())
    for op in ("add", "mul", "div"):
        _same(lambda: OPS[op](an, bn), lambda: OPS[op](a, b))
    _same(lambda: torch.relu(an), lambda: torch.relu(a))
    _same(lambda: an * 3.0, lambda: a * 3.0)


@pytest.mark.parametrize("sa, sb", [((8, 4), (4,)), ((4,), (8, 4)), ((3, 1), (1, 5)), ((), (6,)), ((6,), ())])
def test_broadcasting(sa, sb):
    a, b = torch.randn(sa), torch.randn(sb)
    for op in ("add", "sub", "mul", "div"):
        _same(lambda: OPS[op](a.npu(), b.npu()), lambda: OPS[op](a, b))


def test_mixed_dtypes_and_devices_take_the_general_path():
    a, b = torch.randn(6), torch.randn(6, dtype=torch.float64)
    _same(lambda: a.npu() + b.npu(), lambda: a + b)
    _same(lambda: a.npu() * torch.tensor(2.0, dtype=torch.float64).npu(), lambda: a * torch.tensor(2.0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a.npu() + b.float()  # a CPU tensor that is not 0-d
    with pytest.raises(RuntimeError, match="same device"):
        a.npu(0) + a.npu(1)
    # A CPU 0-d tensor that is not a Python number is still accepted, as on CUDA.
    _same(lambda: a.npu() + torch.tensor(3.0), lambda: a + torch.tensor(3.0))


def test_relu_and_relu_():
    a = torch.randn(33)
    _same(lambda: torch.relu(a.npu()), lambda: torch.relu(a))
    x = a.npu()
    x.relu_()
    torch.testing.assert_close(x.cpu(), torch.relu(a))
    b = torch.tensor([True, False])
    _same(lambda: torch.relu(b.npu()), lambda: torch.relu(b))  # PyTorch's own error for bool


def test_python_numbers_are_scalar_descriptors_not_fills():
    x = torch.randn(8, device="npu")
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    y = (x * 2.0 + 1) / 4 - 0.5
    x.mul_(0.9).add_(1)
    torch.npu.synchronize()
    stats = torch.npu.op_stats()
    for op in ("aclnnMuls", "aclnnAdds", "aclnnDivs", "aclnnSubs"):
        assert stats[op]["device_op"] >= 1, stats
    # No tensor-tensor launch, so no scalar was turned into a device tensor first.
    for op in ("aclnnMul", "aclnnAdd", "aclnnDiv", "aclnnSub"):
        assert stats.get(op, {}).get("device_op", 0) == 0, stats
    torch.testing.assert_close(y.cpu(), (x.cpu() - 1) / 0.9 * 2.0 / 4 + 0.25 - 0.5, rtol=1e-5, atol=1e-5)


def test_autograd_through_fast_path():
    a = torch.randn(10, requires_grad=True)
    an = a.detach().npu().requires_grad_()
    ((a * 3 + a) / 2).relu().sum().backward()
    ((an * 3 + an) / 2).relu().sum().backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)


def test_repeated_geometry_reuses_descriptors_with_each_tensors_memory():
    """Launches on tensors of one geometry share cached descriptors: each must still read and write
    its own storage, offset and dtype (views at other offsets, in-place ops, interleaved shapes)."""
    base = torch.arange(64, dtype=torch.float32)
    npu_base = base.to("npu")
    results, expected = [], []
    for i in range(6):
        a_cpu, b_cpu = base[i:i + 16], base[32 + i:48 + i]  # same sizes and strides, other offsets
        a, b = npu_base[i:i + 16], npu_base[32 + i:48 + i]
        results += [a + b, a * b, torch.relu(a - b)]
        expected += [a_cpu + b_cpu, a_cpu * b_cpu, torch.relu(a_cpu - b_cpu)]
        w = torch.full((16,), float(i), device="npu")  # a fresh storage of the same geometry
        w.add_(a)  # self and out are the same tensor: two operands of one geometry in one launch
        results.append(w)
        expected.append(torch.full((16,), float(i)) + a_cpu)
        m = torch.ones(4, 4, dtype=torch.float64, device="npu") * i  # another geometry in between
        results.append(m + m)
        expected.append(torch.ones(4, 4, dtype=torch.float64) * i * 2)
    for got, want in zip(results, expected):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)


def test_repeated_geometry_from_several_threads():
    """Each thread keeps its own descriptors: concurrent small-op loops stay correct."""
    import threading
    errors = []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            x = torch.randn(16, generator=g)
            y = torch.randn(16, generator=g)
            xn, yn = x.to("npu"), y.to("npu")
            for _ in range(200):
                z = xn * yn + xn
            torch.testing.assert_close(z.cpu(), x * y + x)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors

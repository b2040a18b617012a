"""Tensor creation, copy_ in every direction, views, resize_, set_, fill_, zero_, item on npu.

Every check builds the data on the CPU, runs the same operation on the CPU and on npu, and compares.
"""

import pytest
import torch

from conftest import stall_stream

NPU = torch.device("npu", 0)


def _ref(shape=(4, 6), dtype=torch.float32):
    """Distinct, exactly representable values (so every dtype conversion is comparable exactly)."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32) - n // 2).reshape(shape).to(dtype)


# ---------------------------------------------------------------------------------------------
# creation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_empty_has_requested_metadata(dtype):
    x = torch.empty(3, 5, dtype=dtype, device="npu")
    assert x.device == NPU
    assert x.dtype == dtype
    assert x.shape == (3, 5)
    assert x.is_contiguous()
    assert x.cpu().shape == (3, 5)


def test_empty_strided_keeps_strides_and_round_trips():
    x = torch.empty_strided((2, 3), (1, 2), device="npu")
    assert x.stride() == (1, 2)
    assert x.device == NPU
    src = torch.randn(2, 3)
    x.copy_(src)
    assert torch.equal(x.cpu(), src)


def test_empty_channels_last_memory_format():
    x = torch.empty(2, 3, 4, 5, device="npu", memory_format=torch.channels_last)
    ref = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    assert x.stride() == ref.stride()
    src = torch.randn(2, 3, 4, 5)
    x.copy_(src)
    assert torch.equal(x.cpu(), src)


@pytest.mark.parametrize(
    "factory",
    [
        lambda **kw: torch.zeros(3, 4, **kw),
        lambda **kw: torch.ones(3, 4, **kw),
        lambda **kw: torch.full((3, 4), 2.5, **kw),
        lambda **kw: torch.full((2, 2), 7, dtype=torch.int32, **kw),
        lambda **kw: torch.arange(10, **kw),
        lambda **kw: torch.arange(1.0, 4.0, 0.5, **kw),
        lambda **kw: torch.arange(-3, 11, 3, dtype=torch.int16, **kw),
        lambda **kw: torch.linspace(-1, 1, 7, **kw),
        lambda **kw: torch.eye(4, **kw),
        lambda **kw: torch.tensor([[1, 2], [3, 4]], **kw),
        lambda **kw: torch.zeros_like(torch.empty(2, 3), **kw),
        lambda **kw: torch.full_like(torch.empty(2, 3, dtype=torch.float64), -1.25, **kw),
    ],
    ids=["zeros", "ones", "full", "full_int", "arange", "arange_float", "arange_step_int16",
         "linspace", "eye", "tensor", "zeros_like", "full_like"],
)
def test_factories_match_cpu(factory):
    expected = factory()
    got = factory(device="npu")
    assert got.device == NPU
    assert got.dtype == expected.dtype
    assert torch.equal(got.cpu(), expected)


def test_factory_on_explicit_device_index():
    got = torch.ones(2, 3, device="npu:2")
    assert got.device == torch.device("npu", 2)
    assert torch.equal(got.cpu(), torch.ones(2, 3))


def test_pinned_npu_tensor_is_rejected():
    with pytest.raises(RuntimeError, match="pin"):
        torch.empty(2, device="npu", pin_memory=True)


# ---------------------------------------------------------------------------------------------
# moving tensors: .npu(), .to(), .cpu()
# ---------------------------------------------------------------------------------------------


def test_npu_to_cpu_round_trip():
    src = torch.randn(4, 5)
    for x in (src.npu(), src.to("npu"), src.to(NPU), src.to(device="npu")):
        assert x.device == NPU
        back = x.cpu()
        assert back.device.type == "cpu"
        assert torch.equal(back, src)


def test_to_npu_with_dtype():
    src = torch.randn(4, 5) * 10
    x = src.to("npu", torch.float16)
    assert x.device == NPU and x.dtype == torch.float16
    assert torch.equal(x.cpu(), src.to(torch.float16))
    y = src.to("npu", dtype=torch.int32)
    assert y.dtype == torch.int32
    assert torch.equal(y.cpu(), src.to(torch.int32))


def test_to_same_device_returns_self_and_copy_true_does_not():
    x = torch.randn(3).npu()
    assert x.to("npu:0") is x
    y = x.to("npu:0", copy=True)
    assert y is not x
    y.fill_(0)
    assert not torch.equal(x.cpu(), y.cpu())


def test_cpu_of_cpu_tensor_and_npu_of_npu_tensor_are_noops():
    c = torch.randn(3)
    assert c.cpu() is c
    n = c.npu()
    assert n.npu() is n


# ---------------------------------------------------------------------------------------------
# copy_: layouts and directions
# ---------------------------------------------------------------------------------------------

# Non-contiguous and broadcast views of a (4, 6) base, applied identically on CPU and npu.
VIEWS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "step_slice": lambda t: t[::2, 1::3],
    "negative_offset_slice": lambda t: t[1:, 2:5],
    "permuted_3d": lambda t: t.reshape(2, 3, 4).permute(2, 0, 1),
    "expanded_row": lambda t: t[1:2].expand(5, 6),
    "expanded_scalar": lambda t: t[2, 3].expand(3, 2),
}


@pytest.mark.parametrize("view", VIEWS)
def test_copy_cpu_to_npu_from_view(view):
    base = _ref()
    src = VIEWS[view](base)
    x = src.to("npu")
    assert x.shape == src.shape
    assert torch.equal(x.cpu(), src)


@pytest.mark.parametrize("view", VIEWS)
def test_copy_npu_to_cpu_from_view(view):
    base = _ref()
    src = VIEWS[view](base.npu())
    assert src.device == NPU
    assert torch.equal(src.cpu(), VIEWS[view](base))


@pytest.mark.parametrize("view", VIEWS)
def test_copy_npu_to_npu_from_view(view):
    base = _ref()
    src = VIEWS[view](base.npu())
    dst = torch.empty(src.shape, device="npu")
    dst.copy_(src)
    assert torch.equal(dst.cpu(), VIEWS[view](base))
    assert torch.equal(src.clone().cpu(), VIEWS[view](base))
    assert torch.equal(src.contiguous().cpu(), VIEWS[view](base))


@pytest.mark.parametrize("view", VIEWS)
def test_copy_npu0_to_npu1_from_view(view):
    base = _ref()
    src = VIEWS[view](base.to("npu:0"))
    out = src.to("npu:1")
    assert out.device == torch.device("npu", 1)
    assert torch.equal(out.cpu(), VIEWS[view](base))
    # and back into a non-contiguous destination on npu:0
    dims = list(reversed(range(src.dim())))
    dst = torch.zeros(tuple(reversed(src.shape)), device="npu:0").permute(dims)
    assert not dst.is_contiguous() or src.dim() < 2 or dst.numel() <= 1
    dst.copy_(out)
    assert torch.equal(dst.cpu(), VIEWS[view](base))


@pytest.mark.parametrize("direction", ["cpu->npu", "npu->npu", "npu1->npu0"])
def test_copy_into_noncontiguous_npu_destination(direction):
    src_cpu = _ref((4, 6))
    src = {"cpu->npu": src_cpu, "npu->npu": src_cpu.npu(), "npu1->npu0": src_cpu.to("npu:1")}[direction]
    big = torch.full((8, 12), -100.0, device="npu")
    dst = big[::2, ::2]  # strided window into `big`
    dst.copy_(src)
    expected_big = torch.full((8, 12), -100.0)
    expected_big[::2, ::2] = src_cpu
    assert torch.equal(big.cpu(), expected_big)


def test_copy_into_noncontiguous_cpu_destination():
    src = _ref((4, 6))
    host_big = torch.zeros(6, 4)
    host_big.t().copy_(src.npu())  # npu -> transposed CPU view
    assert torch.equal(host_big, src.t())


@pytest.mark.parametrize("direction", ["cpu->npu", "npu->npu", "npu->cpu"])
def test_broadcasting_copy(direction):
    row = torch.arange(6.0)
    expected = row.expand(4, 6)
    if direction == "cpu->npu":
        dst = torch.zeros(4, 6, device="npu")
        dst.copy_(row)
        got = dst.cpu()
    elif direction == "npu->npu":
        dst = torch.zeros(4, 6, device="npu")
        dst.copy_(row.npu())
        got = dst.cpu()
    else:
        got = torch.zeros(4, 6)
        got.copy_(row.npu())
    assert torch.equal(got, expected)


DTYPE_PAIRS = [
    (torch.float32, torch.float16),
    (torch.float32, torch.bfloat16),
    (torch.float32, torch.int64),
    (torch.float32, torch.bool),
    (torch.float32, torch.float64),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float32),
    (torch.int64, torch.float32),
    (torch.bool, torch.float32),
    (torch.int32, torch.int8),
    (torch.uint8, torch.float32),
]


@pytest.mark.parametrize("src_dtype,dst_dtype", DTYPE_PAIRS, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("direction", ["cpu->npu", "npu->cpu", "npu->npu", "npu0->npu1"])
def test_dtype_converting_copy(src_dtype, dst_dtype, direction):
    base = (torch.randn(5, 7) * 50)
    if src_dtype == torch.uint8:
        base = base.abs()
    src_cpu = base.to(src_dtype)
    expected = src_cpu.to(dst_dtype)
    if direction == "cpu->npu":
        got = src_cpu.to("npu", dst_dtype)
    elif direction == "npu->cpu":
        got = src_cpu.npu().to("cpu", dst_dtype)
    elif direction == "npu->npu":
        got = src_cpu.npu().to(dst_dtype)
    else:
        got = src_cpu.to("npu:0").to("npu:1", dst_dtype)
        assert got.device == torch.device("npu", 1)
    assert got.dtype == dst_dtype
    assert torch.equal(got.cpu(), expected)


def test_dtype_converting_copy_into_noncontiguous_destination():
    src = torch.randn(4, 6) * 10
    dst = torch.zeros(6, 4, dtype=torch.float16, device="npu").t()
    dst.copy_(src)
    assert torch.equal(dst.cpu(), src.to(torch.float16))
    dst64 = torch.zeros(4, 12, dtype=torch.int64, device="npu")[:, ::2]
    dst64.copy_(src.npu())
    assert torch.equal(dst64.cpu(), src.to(torch.int64))


def test_copy_conj_and_neg_views_are_resolved():
    c = torch.randn(4, dtype=torch.complex64)
    assert torch.equal(c.conj().npu().cpu(), c.conj().resolve_conj())
    x = torch.randn(4)
    neg = torch._neg_view(x)
    assert torch.equal(neg.npu().cpu(), -x)


def test_queued_copy_reads_source_values_at_launch_order():
    """In-place writes to the source queued after a copy do not leak into the copy."""
    src = torch.randn(64)
    x = src.npu()
    stall_stream()
    y = x.to(torch.float64)  # queued behind the stall
    z = x[::2].clone()  # a strided npu -> npu copy, also queued
    x.fill_(-3.0)  # queued after the copies: must not affect them
    assert torch.equal(y.cpu(), src.double())
    assert torch.equal(z.cpu(), src[::2])
    assert torch.equal(x.cpu(), torch.full((64,), -3.0))


def test_copy_of_npu_conj_and_neg_views_in_subprocess(run_python):
    run_python(
        """
        import torch
        c = torch.randn(5, dtype=torch.complex64)
        n = c.npu()
        assert torch.equal(n.conj().cpu(), c.conj())
        d = torch.empty(5, dtype=torch.complex64, device="npu")
        d.copy_(n.conj())
        assert torch.equal(d.cpu(), c.conj())
        assert torch.equal(n.conj().imag.cpu(), c.conj().imag)
        assert torch.equal(n.conj().to("npu:1").cpu(), c.conj())
        x = torch.randn(5)
        assert torch.equal(torch._neg_view(x.npu()).cpu(), -x)
        assert torch.equal(torch._neg_view(x.npu()).clone().cpu(), -x)
        print("OK")
        """
    )


def test_copy_to_self_is_noop():
    src = torch.randn(3, 3)
    x = src.npu()
    x.copy_(x)
    assert torch.equal(x.cpu(), src)


def test_non_blocking_copy_from_pageable_memory_then_overwrite_source():
    src = torch.randn(256)
    keep = src.clone()
    x = src.to("npu", non_blocking=True)
    src.fill_(0)  # pageable source: the copy must already hold its own snapshot
    torch.npu.synchronize()
    assert torch.equal(x.cpu(), keep)


def test_copy_waits_for_queued_work_on_source():
    src = torch.randn(64, 64)
    x = src.npu()
    for _ in range(10):
        x.mul_(1.0001)  # queued npu work (fallback or kernels)
    expected = src.clone()
    for _ in range(10):
        expected.mul_(1.0001)
    torch.testing.assert_close(x.cpu(), expected)


# ---------------------------------------------------------------------------------------------
# views share memory
# ---------------------------------------------------------------------------------------------

VIEW_WRITES = {
    "view": lambda t: t.view(24).__setitem__(3, 100.0),
    "reshape": lambda t: t.reshape(2, 12).__setitem__((1, 5), 101.0),
    "transpose": lambda t: t.transpose(0, 1).__setitem__((4, 2), 102.0),
    "t": lambda t: t.t()[0].fill_(103.0),
    "permute": lambda t: t.permute(1, 0).__setitem__((2, 1), 104.0),
    "unfold": lambda t: t.unfold(1, 2, 2).__setitem__((3, 1, 1), 105.0),
    "slice_step": lambda t: t[:, ::3].fill_(106.0),
    "select": lambda t: t.select(0, 2).zero_(),
    "narrow": lambda t: t.narrow(1, 2, 3).fill_(107.0),
    "diagonal": lambda t: t.diagonal().fill_(108.0),
    "unsqueeze_squeeze": lambda t: t.unsqueeze(0).squeeze(0)[1].fill_(109.0),
    "as_strided": lambda t: t.as_strided((2, 2), (6, 1), 7).fill_(110.0),
    "flatten": lambda t: t.flatten().__setitem__(-1, 111.0),
    "unbind": lambda t: t.unbind(0)[3].fill_(112.0),
    "split": lambda t: t.split(2, dim=1)[1].fill_(113.0),
    "view_dtype": lambda t: t.view(torch.int32).__setitem__((0, 0), 0),
}


@pytest.mark.parametrize("name", VIEW_WRITES)
def test_write_through_view_changes_base(name):
    cpu = _ref()
    npu = cpu.npu()
    VIEW_WRITES[name](cpu)
    VIEW_WRITES[name](npu)
    assert torch.equal(npu.cpu(), cpu)


@pytest.mark.parametrize("name", ["view", "reshape", "transpose", "permute", "unfold", "diagonal",
                                  "as_strided", "select"])
def test_views_share_storage_and_do_not_copy(name):
    make = {
        "view": lambda t: t.view(24),
        "reshape": lambda t: t.reshape(6, 4),
        "transpose": lambda t: t.transpose(0, 1),
        "permute": lambda t: t.permute(1, 0),
        "unfold": lambda t: t.unfold(1, 2, 2),
        "diagonal": lambda t: t.diagonal(),
        "as_strided": lambda t: t.as_strided((2, 2), (6, 1), 7),
        "select": lambda t: t.select(1, 4),
    }[name]
    cpu = _ref()
    npu = cpu.npu()
    v_cpu, v_npu = make(cpu), make(npu)
    assert v_npu.device == NPU
    assert v_npu.untyped_storage().data_ptr() == npu.untyped_storage().data_ptr()
    assert v_npu.shape == v_cpu.shape
    assert v_npu.stride() == v_cpu.stride()
    assert v_npu.storage_offset() == v_cpu.storage_offset()
    assert torch.equal(v_npu.cpu(), v_cpu)


def test_write_to_base_is_visible_in_view():
    cpu = _ref()
    npu = cpu.npu()
    v_cpu, v_npu = cpu.t()[1:4], npu.t()[1:4]
    cpu.mul_(-2)
    npu.mul_(-2)
    assert torch.equal(v_npu.cpu(), v_cpu)


def test_reshape_of_noncontiguous_copies():
    cpu = _ref()
    npu = cpu.npu()
    r_cpu, r_npu = cpu.t().reshape(24), npu.t().reshape(24)
    assert torch.equal(r_npu.cpu(), r_cpu)
    r_npu.fill_(0)
    assert torch.equal(npu.cpu(), cpu)  # it was a copy: the base is unchanged


def test_view_incompatible_shape_raises():
    with pytest.raises(RuntimeError):
        _ref().npu().t().view(24)


# ---------------------------------------------------------------------------------------------
# resize_, set_
# ---------------------------------------------------------------------------------------------


def test_resize_grow_keeps_data_prefix():
    src = torch.arange(6.0)
    x = src.npu()
    x.resize_(4, 5)
    assert x.shape == (4, 5)
    assert x.is_contiguous()
    assert torch.equal(x.view(-1)[:6].cpu(), src)
    x.view(-1)[6:].fill_(1.0)  # the new part is writable device memory
    expected = torch.cat([src, torch.ones(14)]).view(4, 5)
    assert torch.equal(x.cpu(), expected)


def test_resize_shrink_and_regrow_keeps_data():
    src = torch.arange(12.0)
    cpu, npu = src.clone(), src.npu()
    for t in (cpu, npu):
        t.resize_(2, 3)
    assert torch.equal(npu.cpu(), cpu)
    for t in (cpu, npu):
        t.resize_(12)  # shrinking never released storage, so the old data is still there
    assert torch.equal(npu.cpu(), cpu)


def test_resize_from_empty_and_to_zero():
    x = torch.empty(0, device="npu")
    x.resize_(3, 3).fill_(2.0)
    assert torch.equal(x.cpu(), torch.full((3, 3), 2.0))
    x.resize_(0)
    assert x.numel() == 0 and x.cpu().shape == (0,)


def test_resize_negative_size_raises():
    with pytest.raises(RuntimeError):
        torch.empty(2, device="npu").resize_(-1)


def test_resize_as_and_channels_last():
    x = torch.empty(0, device="npu")
    x.resize_as_(torch.empty(2, 3, 4))
    assert x.shape == (2, 3, 4)
    y = torch.empty(0, device="npu").resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert y.stride() == torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_set_storage_offset_size_stride():
    base_cpu = torch.arange(20.0)
    base_npu = base_cpu.npu()
    t_cpu = torch.empty(0).set_(base_cpu.untyped_storage(), 3, (3, 4), (5, 1))
    t_npu = torch.empty(0, device="npu").set_(base_npu.untyped_storage(), 3, (3, 4), (5, 1))
    assert t_npu.shape == t_cpu.shape and t_npu.stride() == t_cpu.stride()
    assert t_npu.storage_offset() == 3
    assert torch.equal(t_npu.cpu(), t_cpu)
    # shares memory with the base
    t_cpu.fill_(-1.0)
    t_npu.fill_(-1.0)
    assert torch.equal(base_npu.cpu(), base_cpu)


def test_set_storage_only():
    base = torch.arange(10, dtype=torch.int32).npu()
    t = torch.empty(0, dtype=torch.int32, device="npu").set_(base.untyped_storage())
    assert t.shape == (10,)
    assert torch.equal(t.cpu(), torch.arange(10, dtype=torch.int32))


def test_set_source_tensor_shares_memory():
    src_cpu = _ref().t()
    src = _ref().npu().t()
    t = torch.empty(0, device="npu").set_(src)
    assert t.shape == src.shape and t.stride() == src.stride()
    assert torch.equal(t.cpu(), src_cpu)
    t[0].fill_(55.0)
    src_cpu[0].fill_(55.0)
    assert torch.equal(src.cpu(), src_cpu)


def test_set_no_args_makes_empty():
    t = torch.ones(4, device="npu")
    t.set_()
    assert t.numel() == 0 and t.shape == (0,)
    assert t.device == NPU


def test_set_with_cpu_storage_raises():
    with pytest.raises(RuntimeError):
        torch.empty(0, device="npu").set_(torch.arange(3.0).untyped_storage())


def test_set_beyond_storage_grows_it():
    base_cpu = torch.arange(4.0)
    base_npu = base_cpu.npu()
    t_cpu = torch.empty(0).set_(base_cpu.untyped_storage(), 0, (2, 4), (4, 1))
    t_npu = torch.empty(0, device="npu").set_(base_npu.untyped_storage(), 0, (2, 4), (4, 1))
    assert t_npu.shape == (2, 4)
    assert t_npu.untyped_storage().nbytes() >= 8 * 4
    assert torch.equal(t_npu[0].cpu(), t_cpu[0])  # the old bytes survive the growth
    t_cpu[1].fill_(9.0)
    t_npu[1].fill_(9.0)
    assert torch.equal(t_npu.cpu(), t_cpu)


# ---------------------------------------------------------------------------------------------
# fill_, zero_
# ---------------------------------------------------------------------------------------------

FILL_TARGETS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "step_slice": lambda t: t[:, ::2],
    "column": lambda t: t[:, 3],
    "scalar_element": lambda t: t[2, 1],
    "permuted": lambda t: t.reshape(2, 3, 4).permute(2, 1, 0)[1:],
}


@pytest.mark.parametrize("target", FILL_TARGETS)
@pytest.mark.parametrize("value", [3.5, -2, True])
def test_fill(target, value):
    cpu = _ref()
    npu = cpu.npu()
    FILL_TARGETS[target](cpu).fill_(value)
    FILL_TARGETS[target](npu).fill_(value)
    assert torch.equal(npu.cpu(), cpu)


@pytest.mark.parametrize("target", FILL_TARGETS)
def test_zero(target):
    cpu = _ref()
    npu = cpu.npu()
    FILL_TARGETS[target](cpu).zero_()
    FILL_TARGETS[target](npu).zero_()
    assert torch.equal(npu.cpu(), cpu)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.float16, torch.bfloat16, torch.bool,
                                   torch.float64])
def test_fill_and_zero_dtypes(dtype):
    cpu = torch.ones(5, 3, dtype=dtype)
    npu = cpu.npu()
    for t in (cpu, npu):
        t[1:].fill_(1 if dtype == torch.bool else 7)
        t[:, 1].zero_()
    assert torch.equal(npu.cpu(), cpu)


def test_fill_with_0d_tensor_value():
    cpu = torch.zeros(3, 4)
    npu = cpu.npu()
    cpu.fill_(torch.tensor(1.25))
    npu.fill_(torch.tensor(1.25, device="npu"))
    assert torch.equal(npu.cpu(), cpu)
    npu.fill_(torch.tensor(-4.0))  # a CPU 0-d value works too
    assert torch.equal(npu.cpu(), torch.full((3, 4), -4.0))


def test_fill_with_non_scalar_tensor_raises():
    with pytest.raises(RuntimeError):
        torch.zeros(3, device="npu").fill_(torch.ones(2, device="npu"))


def test_fill_and_zero_on_empty_tensor():
    x = torch.empty(0, 4, device="npu")
    x.fill_(1.0)
    x.zero_()
    assert x.cpu().shape == (0, 4)


def test_fill_then_zero_ordering_on_stream():
    cpu = torch.zeros(8, 8)
    npu = cpu.npu()
    for t in (cpu, npu):
        t.fill_(1.0)
        t[::2].zero_()
        t[:, ::3].fill_(2.0)
        t.zero_()
        t[1].fill_(5.0)
    assert torch.equal(npu.cpu(), cpu)


# ---------------------------------------------------------------------------------------------
# item, tolist, empty and 0-d tensors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value,dtype", [(3.25, torch.float32), (-7, torch.int64), (True, torch.bool),
                                         (0.5, torch.float16), (2.0, torch.bfloat16), (200, torch.uint8)])
def test_item(value, dtype):
    cpu = torch.tensor(value, dtype=dtype)
    npu = cpu.npu()
    assert npu.item() == cpu.item()
    assert type(npu.item()) is type(cpu.item())
    assert float(npu) == float(cpu)
    assert int(npu) == int(cpu)
    assert bool(npu) == bool(cpu)


def test_item_of_element_of_noncontiguous_tensor():
    cpu = _ref()
    npu = cpu.npu()
    assert npu.t()[5, 3].item() == cpu.t()[5, 3].item()
    assert npu[::2, 1::2][1, 2].item() == cpu[::2, 1::2][1, 2].item()


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)], ids=str)
def test_item_of_one_element_tensor_of_any_rank(shape):
    cpu = torch.full(shape, 2.5)
    npu = cpu.npu()
    assert npu.item() == cpu.item()
    assert float(npu) == float(cpu)  # e.g. a loss of shape [1]
    assert npu[:, None].item() == cpu[:, None].item()


def test_item_of_multi_element_tensor_raises():
    with pytest.raises(RuntimeError):
        torch.ones(2, device="npu").item()


def test_tolist():
    cpu = torch.randn(3, 4)
    npu = cpu.npu()
    assert npu.tolist() == cpu.tolist()
    assert npu.t().tolist() == cpu.t().tolist()
    assert torch.tensor(5, device="npu").tolist() == 5
    ints = torch.arange(-3, 3)
    assert ints.npu().tolist() == ints.tolist()


def test_item_sees_preceding_work():
    cpu = torch.zeros(())
    npu = cpu.npu()
    for _ in range(20):
        cpu.add_(0.5)
        npu.add_(0.5)
    assert npu.item() == cpu.item()


def test_empty_tensors():
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        cpu = torch.empty(shape)
        npu = torch.empty(shape, device="npu")
        assert npu.shape == cpu.shape
        assert npu.numel() == 0
        assert npu.cpu().shape == cpu.shape
        assert torch.zeros(shape).npu().shape == cpu.shape
        assert npu.tolist() == cpu.tolist()
    e = torch.empty(0, 3, device="npu")
    e.copy_(torch.empty(0, 3))
    assert e.t().contiguous().shape == (3, 0)


def test_zero_dim_tensors():
    cpu = torch.tensor(2.5)
    npu = cpu.npu()
    assert npu.dim() == 0 and npu.shape == ()
    assert torch.equal((npu * 4 - 1).cpu(), cpu * 4 - 1)
    out = torch.empty((), device="npu")
    out.copy_(cpu)
    assert out.item() == 2.5
    out.fill_(-1)
    assert out.item() == -1.0
    # a 0-d CPU tensor may be combined with an npu tensor
    v = torch.arange(3.0)
    assert torch.equal((v.npu() * torch.tensor(2.0)).cpu(), v * 2)


def test_clone_is_independent():
    cpu = _ref()
    npu = cpu.npu()
    c = npu.clone()
    c.fill_(0)
    assert torch.equal(npu.cpu(), cpu)
    assert torch.equal(c.cpu(), torch.zeros_like(cpu))


def test_clone_preserves_strides():
    src = _ref().npu().t()
    ref = _ref().t().clone()
    c = src.clone()
    assert c.stride() == ref.stride()
    assert torch.equal(c.cpu(), ref)


def test_storage_resize_on_current_device():
    x = torch.arange(4.0, device="npu")
    st = x.untyped_storage()
    st.resize_(64)
    assert st.nbytes() == 64 and st.device == x.device
    assert torch.equal(x.cpu(), torch.arange(4.0))  # the old bytes are kept
    c = torch.arange(4.0)
    c.untyped_storage().resize_(64)
    assert torch.equal(x.cpu(), c)


def test_storage_resize_keeps_device_of_storage(quiet_allocator):
    x = torch.arange(4.0, device="npu:1")
    before0 = torch.npu.memory_allocated(0)
    st = x.untyped_storage()
    st.resize_(64)
    assert st.device == torch.device("npu", 1)
    assert x.untyped_storage().device == x.device
    assert torch.npu.memory_allocated(0) == before0
    assert torch.equal(x.cpu(), torch.arange(4.0))


def test_untyped_storage_on_npu():
    x = _ref().npu()
    st = x.untyped_storage()
    assert st.device == NPU
    assert st.nbytes() == x.numel() * x.element_size()
    host = st.cpu()
    assert torch.equal(torch.empty(0).set_(host).view(4, 6), _ref())
    s2 = torch.UntypedStorage(16).npu()
    assert s2.device.type == "npu" and s2.nbytes() == 16


# ---------------------------------------------------------------------------------------------
# queued work vs. later host-side changes of the same tensor object
# ---------------------------------------------------------------------------------------------

REPEAT = 3  # each round stalls the stream first, so the queued task runs after the host change


def test_dtype_copy_not_affected_by_later_data_assignment_of_source():
    for _ in range(REPEAT):
        src = torch.randn(64)
        x = src.npu()
        stall_stream()
        y = x.to(torch.float64)  # queued npu -> npu conversion reading x
        x.data = torch.zeros(64, dtype=torch.float64, device="npu")
        assert torch.equal(y.cpu(), src.double())


def test_dtype_copy_not_affected_by_later_resize_of_source():
    for _ in range(REPEAT):
        src = torch.arange(6.0)
        x = src.npu()
        stall_stream()
        y = x.to(torch.float64)
        x.resize_(0)
        assert torch.equal(y.cpu(), src.double())


def test_fill_not_redirected_by_later_data_assignment():
    for _ in range(REPEAT):
        a = torch.zeros(16, device="npu")
        b = torch.zeros(16, device="npu")
        old = a.view(16)  # another handle on a's original storage
        stall_stream()
        a.fill_(5.0)  # queued
        a.data = b
        assert torch.equal(b.cpu(), torch.zeros(16))
        assert torch.equal(old.cpu(), torch.full((16,), 5.0))

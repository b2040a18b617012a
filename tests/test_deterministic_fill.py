"""torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory: new npu
memory (empty, empty_like, empty_strided, the grown part of resize_) reads NaN or the dtype's largest
value, as CPU and CUDA give it; without the switch nothing is filled."""

import pytest
import torch

import torch_npu  # noqa: F401


@pytest.fixture
def fill_mode():
    torch.use_deterministic_algorithms(True)
    previous = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = True
    yield
    torch.utils.deterministic.fill_uninitialized_memory = previous
    torch.use_deterministic_algorithms(False)


def expected(shape, dtype):
    return torch.empty(shape, dtype=dtype)  # CPU, filled the same way in this mode


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool,
                                   torch.complex64])
def test_factories_fill(fill_mode, dtype):
    for make in (lambda d: torch.empty(3, 4, dtype=dtype, device=d),
                 lambda d: torch.empty_like(torch.zeros(3, 4, dtype=dtype, device=d)),
                 lambda d: torch.empty_strided((3, 4), (1, 3), dtype=dtype, device=d)):
        npu, cpu = make("npu").cpu(), make("cpu")
        assert torch.equal(npu, cpu) if not dtype.is_floating_point and not dtype.is_complex else \
            torch.isnan(npu).all() and torch.isnan(cpu).all()


def test_resize_fills_the_grown_part_only(fill_mode):
    t = torch.arange(6, dtype=torch.float32, device="npu")
    t.resize_(10)
    got = t.cpu()
    assert torch.equal(got[:6], torch.arange(6, dtype=torch.float32))
    assert torch.isnan(got[6:]).all()
    i = torch.zeros(2, dtype=torch.int32, device="npu")
    i.resize_(4)
    assert i.cpu().tolist() == [0, 0, 2 ** 31 - 1, 2 ** 31 - 1]


def test_not_filled_without_the_switch():
    torch.use_deterministic_algorithms(True)
    previous = torch.utils.deterministic.fill_uninitialized_memory
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        x = torch.zeros(1000, device="npu")
        ptr = x.data_ptr()
        del x
        y = torch.empty(1000, device="npu")  # the cached block comes back as it was left
        assert y.data_ptr() == ptr and torch.equal(y.cpu(), torch.zeros(1000))
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = previous
        torch.use_deterministic_algorithms(False)

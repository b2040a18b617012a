"""arange (exact vs CPU) and the random fills uniform_, normal_, bernoulli_ (statistics, bounds, seeding) on npu."""

import pytest
import torch

from ops_util import FLOATS, assert_device_ops, assert_same, assert_strict_ok, device_op_stats, register_strict

ARANGE_CASES = [
    (10,), (0,), (3, 11), (-3, 11, 3), (10, 0, -2), (0.0, 1.0, 0.1), (1.0, 4.0, 0.5), (-1.5, 2.5, 0.25),
    (5, 5), (0, 1e-3, 1e-4),
]


@pytest.mark.parametrize("args", ARANGE_CASES, ids=str)
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32],
                         ids=str)
def test_arange(args, dtype):
    try:
        expected = torch.arange(*args, dtype=dtype)
    except (ValueError, RuntimeError) as cpu_error:   # e.g. a fractional step truncated to 0 for int64
        with pytest.raises(type(cpu_error), match=str(cpu_error)):
            torch.arange(*args, dtype=dtype, device="npu")
            torch.npu.synchronize()
        return
    got = torch.arange(*args, dtype=dtype, device="npu")
    assert got.device.type == "npu"
    assert_same(got, expected)


def test_arange_out_and_non_contiguous_out():
    cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")
    torch.arange(2, 9, 2, out=cpu_out)
    torch.arange(2, 9, 2, out=npu_out)
    assert_same(npu_out, cpu_out)
    cpu_out, npu_out = torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long, device="npu")
    torch.arange(3, out=cpu_out)
    torch.arange(3, out=npu_out)
    assert_same(npu_out, cpu_out)
    cpu_base, npu_base = torch.zeros(4, 6), torch.zeros(4, 6, device="npu")
    torch.arange(4.0, out=cpu_base[:, 2])   # strided destination
    torch.arange(4.0, out=npu_base[:, 2])
    assert_same(npu_base, cpu_base)


def _seeded(seed, fn):
    torch.npu.manual_seed(seed)
    out = fn()
    assert out.device.type == "npu"
    return out.cpu()


RANDOM_FILLS = {
    "uniform_": lambda t: t.uniform_(-2.0, 3.0),
    "normal_": lambda t: t.normal_(1.5, 0.5),
    "bernoulli_": lambda t: t.bernoulli_(0.3),
}


@pytest.mark.parametrize("name", RANDOM_FILLS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_random_fill_seeding(name, dtype):
    fill = RANDOM_FILLS[name]
    a = _seeded(17, lambda: fill(torch.empty(32, 16, dtype=dtype, device="npu")))
    b = _seeded(17, lambda: fill(torch.empty(32, 16, dtype=dtype, device="npu")))
    c = _seeded(18, lambda: fill(torch.empty(32, 16, dtype=dtype, device="npu")))
    assert a.dtype == dtype
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    torch.npu.manual_seed(17)
    d = fill(torch.empty(32, 16, dtype=dtype, device="npu")).cpu()
    e = fill(torch.empty(32, 16, dtype=dtype, device="npu")).cpu()   # the generator advances
    assert not torch.equal(d, e)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_uniform_bounds_and_moments(dtype):
    lo, hi = -2.0, 3.0
    x = _seeded(1, lambda: torch.empty(4000, dtype=dtype, device="npu").uniform_(lo, hi)).double()
    assert x.min() >= lo and x.max() <= hi       # rounding to a half dtype may reach `hi` itself
    if dtype == torch.float32 or dtype == torch.float64:
        assert x.max() < hi
    n = x.numel()
    mean_sigma = (hi - lo) / 12 ** 0.5 / n ** 0.5
    assert abs(x.mean().item() - (lo + hi) / 2) < 5 * mean_sigma
    assert abs(x.var().item() - (hi - lo) ** 2 / 12) < 0.1 * (hi - lo) ** 2 / 12
    # every part of the range is hit
    hist = torch.histc(x.float(), bins=5, min=lo, max=hi)
    assert (hist > n / 5 * 0.7).all(), hist
    x = _seeded(2, lambda: torch.empty(200, dtype=dtype, device="npu").uniform_())
    assert x.min() >= 0 and x.max() <= 1


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_normal_moments(dtype):
    mean, std = 1.5, 0.5
    x = _seeded(3, lambda: torch.empty(4000, dtype=dtype, device="npu").normal_(mean, std)).double()
    n = x.numel()
    assert abs(x.mean().item() - mean) < 5 * std / n ** 0.5
    assert abs(x.std().item() - std) < 0.05 * std + 5 * std / (2 * n) ** 0.5
    assert ((x - mean).abs() < std).double().mean().item() == pytest.approx(0.6827, abs=0.04)
    z = _seeded(4, lambda: torch.empty(50, dtype=dtype, device="npu").normal_(2.0, 0.0))
    assert torch.equal(z, torch.full((50,), 2.0, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_bernoulli_values_and_rate(dtype, p):
    x = _seeded(5, lambda: torch.empty(4000, dtype=dtype, device="npu").bernoulli_(p))
    assert x.dtype == dtype
    v = x.double()
    assert ((v == 0) | (v == 1)).all()
    n = x.numel()
    sigma = (n * p * (1 - p)) ** 0.5
    assert abs(v.sum().item() - n * p) <= 5 * sigma


def test_random_fills_on_views_and_empty():
    base = torch.zeros(6, 8, device="npu")
    torch.npu.manual_seed(6)
    base[:, 1::2].uniform_(1.0, 2.0)                        # strided view: only its elements change
    base_cpu = base.cpu()
    assert (base_cpu[:, ::2] == 0).all()
    assert ((base_cpu[:, 1::2] >= 1) & (base_cpu[:, 1::2] < 2)).all()
    t = torch.zeros(5, 4, device="npu").t()
    t.normal_()
    assert (t.cpu() != 0).all()
    for fill in RANDOM_FILLS.values():
        assert fill(torch.empty(0, 3, device="npu")).cpu().shape == (0, 3)
    s = torch.empty((), device="npu").uniform_(4.0, 5.0).item()
    assert 4.0 <= s < 5.0


def test_rand_randn_factories_follow_the_seed():
    a = _seeded(9, lambda: torch.rand(50, device="npu"))
    b = _seeded(9, lambda: torch.rand(50, device="npu"))
    assert torch.equal(a, b) and (a >= 0).all() and (a < 1).all()
    c = _seeded(9, lambda: torch.randn(3, 50, device="npu", dtype=torch.float16))
    d = _seeded(9, lambda: torch.randn(3, 50, device="npu", dtype=torch.float16))
    assert torch.equal(c, d)


def test_errors_match_cpu():
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 5, 0, device="npu")
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        torch.arange(0, 5, -1, device="npu")
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range"):
        torch.empty(3, device="npu").uniform_(2.0, 1.0)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torch.empty(3, device="npu").normal_(0.0, -1.0)
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        torch.empty(3, device="npu").bernoulli_(1.5)
        torch.npu.synchronize()


def test_named_device_ops_are_used():
    def run():
        torch.arange(10, device="npu")
        torch.empty(8, device="npu").uniform_()
        torch.empty(8, device="npu").normal_()
        torch.empty(8, device="npu").bernoulli_(0.5)

    assert_device_ops(device_op_stats(run), ["aclnnArange", "aclnnInplaceUniform", "aclnnInplaceNormal",
                                             "aclnnInplaceBernoulli"])


register_strict("factories_random", """
    same(torch.arange(2, 20, 3, device="npu"), torch.arange(2, 20, 3))
    same(torch.arange(0.0, 1.0, 0.1, device="npu"), torch.arange(0.0, 1.0, 0.1))
    torch.npu.manual_seed(1)
    u = torch.empty(1000, device="npu").uniform_(-1.0, 2.0).cpu()
    torch.npu.manual_seed(1)
    same(torch.empty(1000, device="npu").uniform_(-1.0, 2.0), u, atol=0, rtol=0)
    assert u.min() >= -1 and u.max() < 2 and abs(u.mean().item() - 0.5) < 0.15
    n = torch.empty(1000, device="npu").normal_(3.0, 2.0).cpu()
    assert abs(n.mean().item() - 3.0) < 0.35 and abs(n.std().item() - 2.0) < 0.3
    b = torch.empty(1000, device="npu").bernoulli_(0.25).cpu()
    assert ((b == 0) | (b == 1)).all() and abs(b.mean().item() - 0.25) < 0.07
    r = torch.rand(10, device="npu").cpu()
    assert (r >= 0).all() and (r < 1).all()
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "factories_random")

"""Index ops (index_select, gather, scatter / scatter_add, index_put_ and x[idx] = v) on npu vs CPU."""

import pytest
import torch

from ops_util import (assert_device_ops, assert_overlap_error_like_cpu, assert_same, assert_strict_ok,
                      check_out_into_views, check_vs_cpu, device_op_stats, grads_vs_cpu, rand, register_strict,
                      to_npu)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool]


def _src(shape, dtype, noncontig=False):
    return rand(shape, dtype, -9, 9, noncontig=noncontig)


def _perm_index(shape, dim, size):
    """Indices along `dim` without repeats within each slice (so scatter has no write conflicts)."""
    n = shape[dim]
    idx = torch.stack([torch.randperm(size)[:n] for _ in range(max(1, torch.Size(shape).numel() // max(n, 1)))])
    return idx.reshape(-1, n).movedim(-1, 0).reshape((n,) + tuple(s for i, s in enumerate(shape) if i != dim)) \
        .movedim(0, dim).contiguous()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
def test_index_select(dtype, index_dtype):
    x = _src((4, 5, 3), dtype)
    for dim in (0, 1, -1):
        idx = torch.randint(0, x.shape[dim], (6,), dtype=index_dtype)
        check_vs_cpu(lambda t, i: torch.index_select(t, dim, i), x, idx)
    check_vs_cpu(lambda t, i: t.index_select(0, i), x, torch.empty(0, dtype=index_dtype))
    check_vs_cpu(lambda t, i: t.index_select(0, i), _src((5,), dtype), torch.tensor(3, dtype=index_dtype))
    check_vs_cpu(lambda t, i: t.index_select(0, i), _src((), dtype), torch.tensor([0], dtype=index_dtype))
    check_vs_cpu(lambda t, i: t.index_select(1, i), _src((4, 6), dtype, noncontig=True),
                 torch.tensor([[3, 0], [1, 1]], dtype=index_dtype)[:, 0])
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    idx = torch.tensor([2, 0], dtype=index_dtype)
    torch.index_select(x, 1, idx, out=cpu_out)
    torch.index_select(to_npu(x), 1, to_npu(idx), out=npu_out)
    assert_same(npu_out, cpu_out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather(dtype):
    x = _src((4, 5), dtype)
    for dim, ishape in [(0, (3, 5)), (1, (4, 7)), (1, (2, 2)), (-1, (4, 0))]:
        idx = torch.randint(0, x.shape[dim], ishape)
        check_vs_cpu(lambda t, i: torch.gather(t, dim, i), x, idx)
    check_vs_cpu(lambda t, i: torch.gather(t, 1, i), _src((4, 5), dtype, noncontig=True),
                 torch.randint(0, 5, (3, 4)).t())
    check_vs_cpu(lambda t, i: torch.gather(t, 0, i), _src((), dtype), torch.tensor(0))
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    idx = torch.randint(0, 5, (4, 2))
    torch.gather(x, 1, idx, out=cpu_out)
    torch.gather(to_npu(x), 1, to_npu(idx), out=npu_out)
    assert_same(npu_out, cpu_out)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_src_and_value(dtype):
    x = _src((5, 6), dtype)
    for dim in (0, 1):
        idx = _perm_index((3, 4), dim, x.shape[dim])
        src = _src((4, 5), dtype)             # src may be larger than index
        check_vs_cpu(lambda t, i, s: torch.scatter(t, dim, i, s), x, idx, src)
        check_vs_cpu(lambda t, i: torch.scatter(t, dim, i, 3), x, idx)
        check_vs_cpu(lambda t, i: t.scatter(dim, i, 1.0 if dtype.is_floating_point else 1), x, idx)
    idx = _perm_index((2, 6), 0, 5)
    check_vs_cpu(lambda t, i, s: t.scatter(0, i, s), _src((5, 6), dtype, noncontig=True), idx,
                 _src((2, 6), dtype, noncontig=True))
    check_vs_cpu(lambda t, i, s: t.scatter(0, i, s), x, torch.empty(0, 6, dtype=torch.long), _src((2, 6), dtype))
    # in place
    for fn in (lambda t, i, s: t.scatter_(0, i, s), lambda t, i, s: t.scatter_(0, i, 2)):
        c = x.clone()
        n = to_npu(x)
        fn(c, idx, c[:2].clone())
        fn(n, to_npu(idx), n[:2].clone())
        assert_same(n, c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64], ids=str)
def test_scatter_add_and_reduce(dtype):
    x = _src((4, 5), dtype)
    idx = torch.randint(0, 4, (6, 5))            # repeated indices accumulate
    src = _src((6, 5), dtype)
    check_vs_cpu(lambda t, i, s: torch.scatter_add(t, 0, i, s), x, idx, src, scale=4)
    check_vs_cpu(lambda t, i, s: t.scatter_add(1, i, s), x, torch.randint(0, 5, (4, 3)), src[:4], scale=4)
    check_vs_cpu(lambda t, i, s: t.scatter_add(0, i, s), x.t(), torch.randint(0, 5, (3, 2)).t().contiguous().t(),
                 src, scale=4)
    check_vs_cpu(lambda t, i, s: t.scatter_reduce(0, i, s, "sum", include_self=False), x, idx, src, scale=4)
    check_vs_cpu(lambda t, i, s: t.scatter_reduce(0, i, s, "amax"), x, idx, src)
    c, n = x.clone(), to_npu(x)
    c.scatter_add_(0, idx, src)
    n.scatter_add_(0, to_npu(idx), to_npu(src))
    assert_same(n, c, scale=4)
    cpu_out, npu_out = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device="npu")
    torch.scatter_add(x, 0, idx, src, out=cpu_out)
    torch.scatter_add(to_npu(x), 0, to_npu(idx), to_npu(src), out=npu_out)
    assert_same(npu_out, cpu_out, scale=4)


def test_out_into_strided_views():
    x = _src((4, 5), torch.float32)
    check_out_into_views(lambda t, i, out: torch.index_select(t, 1, i, out=out), (x, torch.tensor([4, 0, 4])),
                         (4, 3))
    check_out_into_views(lambda t, i, out: torch.gather(t, 0, i, out=out), (x, torch.randint(0, 4, (3, 5))),
                         (3, 5))
    check_out_into_views(lambda t, i, s, out: torch.scatter_add(t, 0, i, s, out=out),
                         (x, torch.randint(0, 4, (3, 5)), _src((3, 5), torch.float32)), (4, 5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_put(dtype):
    x = _src((5, 4), dtype)
    setters = {
        "rows": lambda t, v: t.__setitem__(torch.tensor([3, 0, 1], device=t.device), v[:1]),
        "pairs": lambda t, v: t.__setitem__((torch.tensor([0, 4], device=t.device),
                                            torch.tensor([1, 3], device=t.device)), v[0, :2]),
        "broadcast_idx": lambda t, v: t.__setitem__((torch.tensor([[0], [2]], device=t.device),
                                                    torch.tensor([1, 2, 3], device=t.device)), v[:2, :3]),
        "slice_and_idx": lambda t, v: t.__setitem__((slice(1, 4), torch.tensor([2, 0], device=t.device)),
                                                    v[:3, :2]),
        "scalar_value": lambda t, v: t.__setitem__(torch.tensor([1, 2], device=t.device), v[0, 0]),
        "int32_index": lambda t, v: t.__setitem__(torch.tensor([2, 4], dtype=torch.int32, device=t.device),
                                                  v[:2]),
        "negative": lambda t, v: t.__setitem__(torch.tensor([-1, -5], device=t.device), v[1:3]),
        "empty_index": lambda t, v: t.__setitem__(torch.tensor([], dtype=torch.long, device=t.device), v[:0]),
        "bool_mask": lambda t, v: t.__setitem__(torch.tensor([True, False, True, False, False], device=t.device),
                                                v[:2]),
    }
    for name, setter in setters.items():
        v = _src((5, 4), dtype)
        c, n = x.clone(), to_npu(x)
        setter(c, v)
        setter(n, to_npu(v))
        assert_same(n, c)
    c, n = x.clone().t(), to_npu(x).t()               # non-contiguous destination
    c[torch.tensor([1, 3])] = _src((4,), dtype)[:1]
    n[torch.tensor([1, 3], device="npu")] = to_npu(c[1:2].clone())
    assert_same(n, c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64], ids=str)
def test_index_put_accumulate_and_out_of_place(dtype):
    x = _src((5, 3), dtype)
    idx = (torch.tensor([0, 2, 0, 0]),)
    v = _src((4, 3), dtype)
    check_vs_cpu(lambda t, i, s: t.index_put(i, s, accumulate=True), x, idx, v, scale=4)
    check_vs_cpu(lambda t, i, s: t.index_put(i, s), x, (torch.tensor([4, 1]),), v[:2])
    c, n = x.clone(), to_npu(x)
    c.index_put_(idx, v, accumulate=True)
    n.index_put_(to_npu(idx), to_npu(v), accumulate=True)
    assert_same(n, c, scale=4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward(dtype):
    x = _src((4, 5), dtype)
    grads_vs_cpu(lambda t: t.index_select(0, torch.tensor([3, 0, 3], device=t.device)), [x], scale=4)
    grads_vs_cpu(lambda t: torch.gather(t, 1, torch.tensor([[0, 4], [1, 1], [2, 2], [3, 0]], device=t.device)),
                 [x], scale=4)
    idx = _perm_index((2, 5), 0, 4)
    grads_vs_cpu(lambda t, s: t.scatter(0, idx.to(t.device), s), [x, _src((2, 5), dtype)], scale=4)
    grads_vs_cpu(lambda t, s: t.scatter_add(0, idx.to(t.device), s), [x, _src((2, 5), dtype)], scale=4)
    grads_vs_cpu(lambda t, s: t.index_put((torch.tensor([1, 3], device=t.device),), s), [x, _src((2, 5), dtype)],
                 scale=4)
    grads_vs_cpu(lambda t: t[torch.tensor([1, 1, 0], device=t.device)], [x], scale=4)


def test_errors_match_cpu():
    x = torch.ones(4, 3, device="npu")
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        torch.gather(x, 0, torch.zeros(2, dtype=torch.long, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 4"):
        torch.gather(x, 0, torch.tensor([[5, 0, 0]], device="npu"))
        torch.npu.synchronize()
    with pytest.raises((IndexError, RuntimeError), match="(out of range|out of bounds)"):
        torch.index_select(x, 0, torch.tensor([0, 4], device="npu"))
        torch.npu.synchronize()
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        x[torch.tensor([7], device="npu")] = 1.0
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_(0, torch.zeros(1, 3, dtype=torch.long, device="npu"), torch.ones(1, 3, dtype=torch.half,
                                                                                     device="npu"))
        torch.npu.synchronize()


@pytest.mark.parametrize("name", ["gather", "index_select"])
def test_out_overlapping_input_raises_like_cpu(name):
    def run(device):
        a = torch.ones(3, 3, device=device)
        idx = torch.tensor([[2, 1, 0]] * 3, device=device)
        if name == "gather":
            torch.gather(a, 0, idx, out=a)
        else:
            torch.index_select(a, 0, idx[0], out=a)
    assert_overlap_error_like_cpu(run)


def test_named_device_ops_are_used():
    x = torch.randn(4, 5).npu()
    idx = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1]]).npu()
    src = torch.randn(2, 5).npu()

    def run():
        torch.index_select(x, 0, idx[0])
        torch.gather(x, 0, idx)
        x.clone().scatter_(0, idx, src)
        x.clone().scatter_(0, idx, 2.0)
        x.clone().scatter_add_(0, idx, src)
        y = x.clone()
        y[idx[0, :2]] = src
        y.index_put_((idx[0, :2],), src, accumulate=True)

    assert_device_ops(device_op_stats(run), ["aclnnIndexSelect", "aclnnGather", "aclnnScatter", "aclnnScatterValue",
                                             "aclnnScatterAdd", "aclnnIndexPutImpl"])


register_strict("indexing", """
    x = torch.randn(4, 5)
    idx = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1]])
    src = torch.randn(2, 5)
    nx, nidx, nsrc = npu(x), npu(idx), npu(src)
    same(torch.index_select(nx, 0, nidx[0]), torch.index_select(x, 0, idx[0]))
    same(torch.gather(nx, 0, nidx), torch.gather(x, 0, idx))
    same(nx.scatter(0, nidx, nsrc), x.scatter(0, idx, src))
    same(nx.scatter(0, nidx, 2.0), x.scatter(0, idx, 2.0))
    same(nx.scatter_add(0, nidx, nsrc), x.scatter_add(0, idx, src))
    ny, y = nx.clone(), x.clone()
    ny[nidx[0, :2]] = nsrc
    y[idx[0, :2]] = src
    same(ny, y)
    ny.index_put_((nidx[0, :2],), nsrc, accumulate=True)
    y.index_put_((idx[0, :2],), src, accumulate=True)
    same(ny, y)
    # backward: index_select -> index_add (not in the contract) is left out; gather -> scatter_add
    cx = x.clone().requires_grad_()
    nxg = npu(x, grad=True)
    co, no = torch.gather(cx, 0, idx), torch.gather(nxg, 0, nidx)
    g = torch.rand(co.shape)
    co.backward(g)
    no.backward(npu(g))
    same(nxg.grad, cx.grad)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "indexing")

"""How npu work shares the host: OpenMP teams, the host kernels' memory cache, result placement,
short ATen-backed kernels on the calling thread, and the caching pinned allocator.

Speed is measured in bench/ (the demo section); these tests check the behaviour each mechanism
promises and that results stay exactly those of the CPU.
"""

import copy
import os
import time

import torch
import torch.nn.functional as F

import torch_npu


def _threads() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _settled_threads(target=None, timeout=2.0) -> int:
    """The thread count once it stops changing (or reaches `target`)."""
    deadline = time.monotonic() + timeout
    last = _threads()
    while time.monotonic() < deadline:
        time.sleep(0.01)
        now = _threads()
        if (target is not None and now <= target) or (target is None and now == last):
            return now
        last = now
    return last


def test_a_stream_worker_releases_its_openmp_team_when_idle():
    x = torch.randn(32, 16, 32, 32, device="npu")
    w = torch.randn(32, 16, 3, 3, device="npu")
    torch.npu.synchronize()
    baseline = _settled_threads()
    F.conv2d(x, w, padding=1)
    y = F.conv2d(x, w, padding=1)
    y.sum().item()  # a host wait: the worker releases its team as soon as it is out of work
    assert _settled_threads(target=baseline) <= baseline, "the stream worker kept its OpenMP team"
    # And starts a new one for the next parallel kernel, with the same results.
    torch.testing.assert_close(F.conv2d(x, w, padding=1).cpu(), F.conv2d(x.cpu(), w.cpu(), padding=1))


def test_convolution_results_are_placed_or_copied_exactly():
    """Forward and backward through every layout the placement sees: dense outputs are written in
    place, channels_last and reduced-precision ones are copied; all equal the CPU's."""
    torch.manual_seed(0)
    for memory_format in (torch.contiguous_format, torch.channels_last):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(4, 8, 12, 12).to(dtype=dtype, memory_format=memory_format)
            w = torch.randn(6, 8, 3, 3).to(dtype)
            b = torch.randn(6).to(dtype)
            xn, wn, bn = (t.npu().requires_grad_() for t in (x, w, b))
            xc, wc, bc = (t.clone().requires_grad_() for t in (x, w, b))
            out_n = F.conv2d(xn, wn, bn, padding=1, stride=2)
            out_c = F.conv2d(xc, wc, bc, padding=1, stride=2)
            g = torch.randn_like(out_c)
            out_n.backward(g.npu())
            out_c.backward(g)
            tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(out_n.cpu(), out_c, **tol)
            for a, c in ((xn, xc), (wn, wc), (bn, bc)):
                torch.testing.assert_close(a.grad.cpu(), c.grad, **tol)


def test_repeated_convolutions_write_their_results_in_place():
    """oneDNN's convolution allocates blocks of its result's size before the result (a reordered
    input, its blocked output); after one call with given shapes the placement goes to the block the
    kernel returns, so later steps store forward and backward results with no copy, and stay exact."""
    torch.manual_seed(0)
    for cin, cout, stride in ((3, 16, 1), (16, 16, 1), (16, 32, 2)):
        x = torch.randn(8, cin, 16, 16)
        w = torch.randn(cout, cin, 3, 3)
        xn, wn = x.npu().requires_grad_(), w.npu().requires_grad_()
        g = torch.randn_like(F.conv2d(x, w, padding=1, stride=stride))
        F.conv2d(xn, wn, padding=1, stride=stride).backward(g.npu())  # learns where results go
        torch.npu.synchronize()
        before = torch_npu._C._host_cache_stats()
        for _ in range(3):
            out = F.conv2d(xn, wn, padding=1, stride=stride)
            out.backward(g.npu())
        torch.npu.synchronize()
        after = torch_npu._C._host_cache_stats()
        assert after["results_copied"] == before["results_copied"], (cin, cout, stride)
        assert after["results_in_place"] - before["results_in_place"] == 9  # out, grad input, grad weight
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        for _ in range(4):
            out_c = F.conv2d(xc, wc, padding=1, stride=stride)
            out_c.backward(g)
        torch.testing.assert_close(out.cpu(), out_c, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(wn.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-3)


def test_batch_norm_and_layer_norm_gradients_are_placed():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(16)
    ln = torch.nn.LayerNorm(64)
    for module, shape in ((bn, (8, 16, 16, 16)), (ln, (8, 32, 64))):
        x = torch.randn(shape)
        g = torch.randn(shape)
        mn = copy.deepcopy(module).npu()
        xn = x.npu().requires_grad_()
        mn(xn).backward(g.npu())  # learns where results go
        torch.npu.synchronize()
        before = torch_npu._C._host_cache_stats()
        mn(xn).backward(g.npu())
        torch.npu.synchronize()
        after = torch_npu._C._host_cache_stats()
        assert after["results_copied"] == before["results_copied"], type(module).__name__
        assert after["results_in_place"] - before["results_in_place"] == 3
        mc, xc = copy.deepcopy(module), x.clone().requires_grad_()
        for _ in range(2):
            mc(xc).backward(g)
        torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(mn.weight.grad.cpu(), mc.weight.grad, rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(mn.bias.grad.cpu(), mc.bias.grad, rtol=1e-4, atol=1e-3)


def test_gradients_of_one_size_are_stored_apart():
    """A 1x1 convolution with batch == out channels: grad input and grad weight have the same size,
    so a kernel's first block of that size may be either; each must still land in its own output."""
    torch.manual_seed(0)
    x = torch.randn(32, 64, 1, 1)
    w = torch.randn(32, 64, 1, 1)
    g = torch.randn(32, 32, 1, 1)
    xn, wn = x.npu().requires_grad_(), w.npu().requires_grad_()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    for _ in range(3):
        F.conv2d(xn, wn).backward(g.npu())
        F.conv2d(xc, wc).backward(g)
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wn.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)


def test_host_kernel_temporaries_come_from_a_cache_that_empty_cache_frees():
    x = torch.randn(32, 16, 32, 32, device="npu")
    w = torch.randn(32, 16, 3, 3, device="npu")
    for _ in range(3):
        F.conv2d(x, w, padding=1)
    torch.npu.synchronize()
    before = torch_npu._C._host_cache_stats()
    for _ in range(5):
        F.conv2d(x, w, padding=1)
    torch.npu.synchronize()
    after = torch_npu._C._host_cache_stats()
    assert after["misses"] == before["misses"], "a recurring temporary was mapped anew"
    assert after["hits"] > before["hits"] and after["in_use_bytes"] == 0
    assert after["cached_bytes"] > 0
    torch.npu.empty_cache()
    assert torch_npu._C._host_cache_stats()["cached_bytes"] == 0


def test_small_aten_backed_kernels_keep_stream_order():
    """Small kernels may run on the calling thread when the stream is idle; behind queued work they
    must still see that work's results."""
    big = torch.zeros(64, 64, 64, device="npu")
    logits = torch.randn(32, 10, device="npu")
    for _ in range(3):
        big.add_(1)                       # queued work on the stream
        logits.copy_(big[0, :32, :10])    # the small inputs depend on it
        arg = logits.argmax(1)            # a short ATen-backed kernel behind queued work
        total = (arg == 0).float().mean() + logits.mean()
        expect_logits = big.cpu()[0, :32, :10]
        assert torch.equal(arg.cpu(), expect_logits.argmax(1))
        torch.testing.assert_close(total.item(), ((expect_logits.argmax(1) == 0).float().mean()
                                                  + expect_logits.mean()).item())


def test_pinned_blocks_are_reused_only_after_their_copies():
    """A freed pinned buffer that an asynchronous copy still reads is not handed out again until the
    copy has run: the device gets the values the buffer had at the copy."""
    big = torch.ones(256, 256, device="npu")
    results, expected = [], []
    for value in range(6):
        for _ in range(20):
            big = big @ big / 256  # keeps the stream busy, so the copies below wait in its queue
        host = torch.full((64, 1024), float(value)).pin_memory()
        results.append(host.to("npu", non_blocking=True))
        expected.append(float(value))
        del host  # freed while its copy is still queued
    torch.npu.synchronize()
    for got, value in zip(results, expected):
        assert bool((got == value).all()), f"a pinned block was reused before its copy ran ({value})"
    # And blocks are cached: pinning again costs no new pinned allocation.
    torch.full((64, 1024), 1.0).pin_memory()
    stats_before = torch.npu.host_memory_stats() if hasattr(torch.npu, "host_memory_stats") else None
    t = torch.full((64, 1024), 2.0).pin_memory()
    assert t.is_pinned()
    if stats_before is not None:
        assert torch.npu.host_memory_stats()["num_host_alloc"] == stats_before["num_host_alloc"]

"""Several Python threads using npu at once: per-thread streams and devices, results equal the CPU's."""

import threading

import torch

N_THREADS = 6
ITERS = 5


def _work(x, w):
    """A mix of native npu ops (copies, views, fill_) and CPU-fallback ops (matmul, relu, cumsum)."""
    h = torch.relu(x @ w)
    h = h.t().contiguous()
    h[:, ::2].fill_(0.5)
    return torch.cumsum(h, dim=1) * 0.1


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(12, 8, generator=g), torch.randn(8, 10, generator=g)


def _run_threads(target):
    errors = []
    barrier = threading.Barrier(N_THREADS)

    def wrapped(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            errors.append((i, e))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert not errors, errors


def test_threads_each_on_own_stream():
    results = {}

    def worker(i):
        x_cpu, w_cpu = _inputs(i)
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            assert torch.npu.current_stream() == s
            x, w = x_cpu.npu(), w_cpu.npu()
            outs = [_work(x, w) for _ in range(ITERS)]
        s.synchronize()
        results[i] = [o.cpu() for o in outs]

    _run_threads(worker)
    for i in range(N_THREADS):
        x_cpu, w_cpu = _inputs(i)
        expected = _work(x_cpu, w_cpu)
        assert len(results[i]) == ITERS
        for out in results[i]:
            torch.testing.assert_close(out, expected)


def test_threads_on_different_devices():
    results = {}

    def worker(i):
        dev = i % 3
        x_cpu, w_cpu = _inputs(100 + i)
        with torch.npu.device(dev):
            assert torch.npu.current_device() == dev
            s = torch.npu.Stream()
            with torch.npu.stream(s):
                x, w = x_cpu.npu(), w_cpu.npu()
                assert x.device == torch.device("npu", dev)
                out = _work(x, w)
                for _ in range(ITERS):
                    out = out + _work(x, w)
            s.synchronize()
            assert torch.npu.current_device() == dev
        results[i] = (out.device, out.cpu())

    _run_threads(worker)
    for i in range(N_THREADS):
        x_cpu, w_cpu = _inputs(100 + i)
        expected = _work(x_cpu, w_cpu)
        for _ in range(ITERS):
            expected = expected + _work(x_cpu, w_cpu)
        device, out = results[i]
        assert device == torch.device("npu", i % 3)
        torch.testing.assert_close(out, expected)


def test_current_device_and_stream_are_thread_local():
    main_stream = torch.npu.current_stream()
    seen = {}

    def worker(i):
        torch.npu.set_device(i % 4)
        s = torch.npu.Stream()
        torch.npu.set_stream(s)
        barrier_local.wait()  # every thread has switched before anyone checks
        seen[i] = (torch.npu.current_device(), torch.npu.current_stream() == s)

    barrier_local = threading.Barrier(N_THREADS)
    _run_threads(worker)
    for i in range(N_THREADS):
        assert seen[i] == (i % 4, True)
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream() == main_stream


def test_threads_sharing_one_input_tensor():
    a_cpu = torch.randn(16, 16)
    a = a_cpu.npu()
    torch.npu.synchronize()
    results = {}

    def worker(i):
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            y = (a * (i + 1)).sum(dim=0)
            z = y.to("npu:1") if i % 2 else y.clone()
        s.synchronize()
        results[i] = z.cpu()

    _run_threads(worker)
    for i in range(N_THREADS):
        torch.testing.assert_close(results[i], (a_cpu * (i + 1)).sum(dim=0))


def test_threads_allocate_and_free_concurrently():
    torch.npu.synchronize()

    def worker(i):
        for k in range(20):
            n = 100 + 37 * (i + k)
            t = torch.full((n,), float(i), device="npu")
            assert t.sum().item() == float(i) * n
            del t

    _run_threads(worker)
    torch.npu.synchronize()
    stats = torch.npu.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.npu.memory_allocated()
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()

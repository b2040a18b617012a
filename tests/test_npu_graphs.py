"""NPU graphs: torch.npu.NPUGraph capture and replay against the same work on the CPU, side streams,
memory pools, random numbers, make_graphed_callables, forbidden calls and their recovery, dumps."""

import gc

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: F401


def capture(fn, pool=None, mode="global"):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, pool=pool, capture_error_mode=mode):
        out = fn()
    return g, out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_replay_recomputes_named_and_generic_ops_on_new_inputs(dtype):
    x = torch.randn(8, 16).to(dtype).npu()
    w = torch.randn(16, 16).to(dtype).npu()

    def body(a, b):
        # matmul / add / relu / softmax are named device ops; cumsum and erfinv run through the
        # generic executor.
        h = torch.relu(a @ b + 1)
        return F.softmax(h.float(), dim=-1).to(dtype), torch.cumsum(h, 0), torch.erfinv(torch.tanh(a.float()) * 0.5)

    g, outs = capture(lambda: body(x, w))
    for _ in range(3):
        xc, wc = torch.randn(8, 16).to(dtype), torch.randn(16, 16).to(dtype)
        x.copy_(xc.npu())
        w.copy_(wc.npu())
        g.replay()
        refs = body(xc, wc)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        for out, ref in zip(outs, refs):
            torch.testing.assert_close(out.cpu().float(), ref.float(), rtol=tol, atol=tol)


def test_captured_work_does_not_run_until_replay_and_integer_ops_replay():
    counter = torch.zeros(4, dtype=torch.int64, device="npu")
    g, _ = capture(lambda: counter.add_(torch.arange(4, device="npu")))
    assert counter.cpu().tolist() == [0, 0, 0, 0]
    for _ in range(5):
        g.replay()
    assert counter.cpu().tolist() == [0, 5, 10, 15]
    assert g._task_count() >= 2


def test_side_stream_fork_and_join_replays_both_branches():
    x = torch.ones(4, 4, device="npu")
    side = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        main = torch.npu.current_stream()
        a = x + x
        side.wait_stream(main)
        with torch.npu.stream(side):
            b = x / x
            b = b + x
        main.wait_stream(side)
        c = a * b
    for value in (2.0, -3.0):
        x.fill_(value)
        g.replay()
        torch.testing.assert_close(c.cpu(), (torch.full((4, 4), value) * 2) * (1 + torch.full((4, 4), value)))


def test_unjoined_side_stream_fails_the_capture_with_a_fix():
    x = torch.ones(4, device="npu")
    side = torch.npu.Stream()
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="not joined back"):
        with torch.npu.graph(g):
            side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(side):
                x.add_(1)
    assert (x + 1).cpu().tolist() == [2.0] * 4  # the device works on


def test_graph_memory_is_private_survives_empty_cache_and_is_shared_by_pool():
    x = torch.randn(256, 256, device="npu")

    def body():
        t = x * 2  # a temporary freed inside the capture
        return (t + 1).sum(0)

    g1, y1 = capture(body)
    torch.npu.empty_cache()
    pool = g1.pool()
    in_pool = [s for s in torch.npu.memory._snapshot()["segments"] if tuple(s["segment_pool_id"]) == tuple(pool)]
    assert in_pool, "the graph's segments carry its pool id"
    lo = min(s["address"] for s in in_pool)
    hi = max(s["address"] + s["total_size"] for s in in_pool)
    # Eager allocations never land in a live graph pool (a replay would overwrite them).
    eager = [torch.empty(256, 256, device="npu") for _ in range(4)]
    assert all(not (lo <= e.data_ptr() < hi) for e in eager)
    g1.replay()
    torch.testing.assert_close(y1.cpu(), (x.cpu() * 2 + 1).sum(0))
    # A second graph sharing the pool.
    g2, y2 = capture(lambda: (x - 1).sum(1), pool=pool)
    assert tuple(g2.pool()) == tuple(pool)
    g2.replay()
    torch.testing.assert_close(y2.cpu(), (x.cpu() - 1).sum(1))
    handle = torch.npu.graph_pool_handle()
    g3, y3 = capture(lambda: x.neg(), pool=handle)
    assert tuple(g3.pool()) == tuple(handle)
    g3.replay()
    torch.testing.assert_close(y3.cpu(), -x.cpu())


def test_replays_draw_fresh_random_numbers_and_manual_seed_reproduces_them():
    g, (u, n, d) = capture(lambda: (torch.rand(1000, device="npu"), torch.randn(1000, device="npu"),
                                    F.dropout(torch.ones(1000, device="npu"), 0.5)))
    draws = []
    for _ in range(3):
        g.replay()
        draws.append((u.cpu().clone(), n.cpu().clone(), d.cpu().clone()))
    assert not torch.equal(draws[0][0], draws[1][0]) and not torch.equal(draws[1][0], draws[2][0])
    assert not torch.equal(draws[0][1], draws[1][1])
    assert not torch.equal(draws[0][2], draws[1][2])
    for uu, nn, dd in draws:
        assert 0 <= uu.min() and uu.max() < 1 and abs(uu.mean() - 0.5) < 0.05
        assert abs(nn.mean()) < 0.15 and abs(nn.std() - 1) < 0.15
        assert set(dd.unique().tolist()) <= {0.0, 2.0} and abs((dd == 0).float().mean() - 0.5) < 0.07
    torch.manual_seed(123)
    g.replay()
    first = u.cpu().clone()
    torch.manual_seed(123)
    g.replay()
    assert torch.equal(first, u.cpu())


def test_make_graphed_callables_matches_eager_training_on_cpu():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    npu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3)).npu()
    npu_model.load_state_dict({k: v.npu() for k, v in cpu_model.state_dict().items()})
    opt_cpu = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    opt_npu = torch.optim.SGD(npu_model.parameters(), lr=0.1)
    graphed = torch.npu.make_graphed_callables(npu_model, (torch.randn(4, 8, device="npu", requires_grad=True),))
    for _ in range(4):
        x = torch.randn(4, 8)
        target = torch.randn(4, 3)
        for model, opt, xin, t in ((cpu_model, opt_cpu, x, target), (graphed, opt_npu, x.npu(), target.npu())):
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(xin.requires_grad_()), t)
            loss.backward()
            opt.step()
    for (name, p_cpu), p_npu in zip(cpu_model.named_parameters(), npu_model.parameters()):
        torch.testing.assert_close(p_npu.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5, msg=name)


def test_make_graphed_callables_several_functions_and_unused_inputs():
    w = torch.randn(4, 4, device="npu", requires_grad=True)

    def f1(a, unused):
        return (a @ w).tanh()

    def f2(b):
        return b.sigmoid() * 2

    a = torch.randn(3, 4, device="npu", requires_grad=True)
    unused = torch.randn(3, 4, device="npu", requires_grad=True)
    g1, g2 = torch.npu.make_graphed_callables((f1, f2), ((a, unused), (torch.randn(3, 4, device="npu",
                                                                                   requires_grad=True),)),
                                               allow_unused_input=True)
    a_new = torch.randn(3, 4)
    a_in = a_new.npu().requires_grad_()
    out = g2(g1(a_in, unused))
    out.sum().backward()
    ref_a = a_new.clone().requires_grad_()
    w_cpu = w.detach().cpu().requires_grad_()
    ref = ((ref_a @ w_cpu).tanh().sigmoid() * 2)
    ref.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a_in.grad.cpu(), ref_a.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", ["item", "cpu", "print", "synchronize", "tensor"])
def test_forbidden_calls_raise_clearly_and_the_capture_goes_on(call):
    x = torch.randn(8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = x + 1
        with pytest.raises(RuntimeError, match="capturing|capture") as info:
            if call == "item":
                y.sum().item()
            elif call == "cpu":
                y.cpu()
            elif call == "print":
                print(y)
            elif call == "synchronize":
                torch.npu.synchronize()
            else:
                torch.tensor([1.0, 2.0], device="npu")
        assert "refused" in str(info.value), str(info.value)
        z = y * 2  # recorded after the refused call
    assert not torch.npu.is_current_stream_capturing()
    x.fill_(3.0)
    g.replay()
    assert z.cpu().tolist() == [8.0] * 8
    torch.testing.assert_close((x * 3).cpu(), x.cpu() * 3)  # eager work goes on too


def test_a_body_exception_ends_the_capture_and_propagates():
    x = torch.randn(8, device="npu")
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="capturing"):
        with torch.npu.graph(g):
            y = x + 1
            y.cpu()
    assert not torch.npu.is_current_stream_capturing()
    g2, y2 = capture(lambda: x * 4)  # capturing works again
    g2.replay()
    torch.testing.assert_close(y2.cpu(), x.cpu() * 4)


def test_capture_modes_decide_which_synchronising_calls_are_refused():
    x = torch.randn(8, device="npu")
    other = torch.npu.Stream()
    g, y = capture(lambda: (other.synchronize(), x + 1)[1], mode="relaxed")
    g.replay()
    torch.testing.assert_close(y.cpu(), x.cpu() + 1)
    with pytest.raises(RuntimeError, match="global"):
        capture(lambda: other.synchronize(), mode="global")
    with pytest.raises(ValueError, match="capture_error_mode"):
        capture(lambda: x + 1, mode="strict")


def test_misuse_is_reported():
    g = torch.npu.NPUGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="without a preceding"):
        g.replay()
    with pytest.raises(RuntimeError, match="without a preceding"):
        g.pool()
    with pytest.raises(TypeError, match="NPUGraph"):
        torch.npu.graph(object())
    g2, _ = capture(lambda: torch.ones(2, device="npu") + 1)
    with pytest.raises(RuntimeError, match="already owns"):
        with torch.npu.graph(g2):
            pass
    g2.reset()
    g3, y = capture(lambda: torch.ones(2, device="npu") + 2)
    g3.replay()
    assert y.cpu().tolist() == [3.0, 3.0]


def test_is_current_stream_capturing_and_body_exceptions_propagate():
    assert not torch.npu.is_current_stream_capturing()
    seen = []
    g = torch.npu.NPUGraph()
    with pytest.raises(KeyError):
        with torch.npu.graph(g):
            seen.append(torch.npu.is_current_stream_capturing())
            raise KeyError("from the body")
    assert seen == [True]
    assert not torch.npu.is_current_stream_capturing()


def test_debug_dump_names_the_captured_ops(tmp_path):
    x = torch.randn(4, 4, device="npu")
    g, _ = capture(lambda: torch.relu(x @ x + 1))
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    text = path.read_text()
    assert "aclnnMm" in text or "aclnnMatmul" in text, text
    assert text.index("aclnnRelu") > text.index("aclnnAdd"), text


def test_mem_pool_routes_this_threads_allocations():
    pool = torch.npu.MemPool()
    assert pool.use_count() == 1
    with torch.npu.use_mem_pool(pool):
        assert pool.use_count() == 2
        t = torch.empty(4096, device="npu")
    assert pool.use_count() == 1
    segments = torch.npu.memory._snapshot()["segments"]
    mine = [s for s in segments if tuple(s["segment_pool_id"]) == tuple(pool.id)]
    assert any(s["address"] <= t.data_ptr() < s["address"] + s["total_size"] for s in mine)
    outside = torch.empty(4096, device="npu")
    assert not any(s["address"] <= outside.data_ptr() < s["address"] + s["total_size"] for s in mine)
    with pytest.raises(ValueError, match="allocator"):
        torch.npu.MemPool(allocator=object())
    with pytest.raises(TypeError):
        torch.npu.use_mem_pool(object())


def test_reset_cycles_do_not_grow_reserved_memory():
    x = torch.randn(256, 256, device="npu")
    side = torch.npu.Stream()

    def cycle():
        # Outputs freed after the reset, and no empty_cache(): the pools must give memory back themselves.
        g = torch.npu.NPUGraph()
        with torch.npu.stream(side):
            g.capture_begin()
            y = torch.relu(x @ x) + 1
            g.capture_end()
        g.replay()
        g.reset()
        del y

    for _ in range(5):
        cycle()
    torch.npu.synchronize()
    base = torch.npu.memory_reserved()
    for _ in range(300):
        cycle()
    torch.npu.synchronize()
    assert torch.npu.memory_reserved() <= base


def test_faults_and_the_watchdog_see_replayed_ops(run_python):
    proc = run_python(
        """
        import torch, torch_npu
        x = torch.ones(8, device="npu")
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            y = x.exp() * 2
        try:
            g.replay()
            torch.npu.synchronize()
            print("NO FAILURE")
        except RuntimeError as e:
            print("FAILED:", e)
        """,
        env={"NPU_SIM_FAULT": "task_fail:op=aclnnExp"},
        check=False,
    )
    assert "FAILED:" in proc.stdout, proc.stdout + proc.stderr
    assert "aclnnExp" in proc.stdout and "graph" in proc.stdout, proc.stdout


def test_task_groups_update_captured_work_through_an_external_event():
    x = torch.ones(4, device="npu")
    g = torch.npu.NPUGraph()
    event = torch.npu.ExternalEvent()
    update_stream = torch.npu.Stream()
    with torch.npu.graph(g):
        stream = torch.npu.current_stream()
        event.wait(stream)
        event.reset(stream)
        torch.npu.graph_task_group_begin(stream)
        y = x * 2
        handle = torch.npu.graph_task_group_end(stream)
        z = y + 1
    event.record(update_stream)
    g.replay()
    assert z.cpu().tolist() == [3.0] * 4
    assert not event.query(), "the replay reset the flag"
    with torch.npu.stream(update_stream):
        torch.npu.graph_task_update_begin(update_stream, handle)
        torch.mul(x, 5, out=y)
        torch.npu.graph_task_update_end(update_stream)
        event.record(update_stream)
    g.replay()
    assert z.cpu().tolist() == [6.0] * 4
    with pytest.raises(RuntimeError, match="not capturing"):
        torch.npu.graph_task_group_begin(torch.npu.current_stream())


def test_attention_out_form_in_a_task_group_takes_new_sequence_lengths():
    """vLLM-style decoding: npu_fused_infer_attention_score.out(..., workspace=, out=[...]) captured in a
    task group, re-issued with new actual_seq_lengths_kv on an update stream; the replay computes with them."""
    import torch_npu

    q = torch.randn(1, 4, 1, 32, dtype=torch.float16, device="npu")
    k = torch.randn(1, 4, 64, 32, dtype=torch.float16, device="npu")
    v = torch.randn(1, 4, 64, 32, dtype=torch.float16, device="npu")
    kw = dict(num_heads=4, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    eager = {n: torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[n], **kw) for n in (20, 64)}
    workspace = torch_npu._npu_fused_infer_attention_score_get_max_workspace(q, k, v, actual_seq_lengths_kv=[64], **kw)
    out, lse = torch.empty_like(eager[20][0]), torch.empty_like(eager[20][1])
    got = torch_npu.npu_fused_infer_attention_score.out(q, k, v, actual_seq_lengths_kv=[20], workspace=workspace,
                                                        out=[out, lse], **kw)
    assert got[0] is out and got[1] is lse
    assert torch.equal(out.cpu(), eager[20][0].cpu()) and torch.equal(lse.cpu(), eager[20][1].cpu())
    assert torch_npu.npu_fused_infer_attention_score.default is torch.ops.npu.npu_fused_infer_attention_score.default

    g, event, update_stream = torch.npu.NPUGraph(), torch.npu.ExternalEvent(), torch.npu.Stream()
    out.zero_()
    with torch.npu.graph(g):
        stream = torch.npu.current_stream()
        event.wait(stream)
        event.reset(stream)
        torch.npu.graph_task_group_begin(stream)
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, actual_seq_lengths_kv=[20], workspace=workspace,
                                                      out=[out, lse], **kw)
        handle = torch.npu.graph_task_group_end(stream)
    with torch.npu.stream(update_stream):
        torch.npu.graph_task_update_begin(update_stream, handle)
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, actual_seq_lengths_kv=[64], workspace=workspace,
                                                      out=[out, lse], **kw)
        torch.npu.graph_task_update_end(update_stream)
        event.record(update_stream)
    g.replay()
    assert torch.equal(out.cpu(), eager[64][0].cpu()) and torch.equal(lse.cpu(), eager[64][1].cpu())
    with pytest.raises(ValueError, match="attention_out has shape"):
        torch_npu.npu_fused_infer_attention_score.out(q, k, v, out=[torch.empty(3, device="npu"), lse], **kw)


def test_update_gives_recorded_attention_ops_new_sequence_lengths():
    q = torch.randn(1, 4, 1, 32, dtype=torch.float16, device="npu")
    k = torch.randn(1, 4, 128, 32, dtype=torch.float16, device="npu")
    v = torch.randn(1, 4, 128, 32, dtype=torch.float16, device="npu")

    def attention(lengths, device="npu"):
        import torch_npu
        return torch_npu.npu_fused_infer_attention_score(
            q.to(device), k.to(device), v.to(device), num_heads=4, input_layout="BNSD", scale=0.1,
            actual_seq_lengths_kv=lengths)[0]

    def reference(length):  # attention over the first `length` keys, on the CPU
        qc, kc, vc = (t.cpu().float() for t in (q, k, v))
        scores = (qc @ kc[:, :, :length].transpose(-1, -2)) * 0.1
        return torch.softmax(scores, -1) @ vc[:, :, :length]

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        out = attention([29])
    assert len(g.graph_dispatch_mode.records) == 1
    g.replay()
    torch.testing.assert_close(out.cpu().float(), reference(29), rtol=2e-2, atol=2e-3)
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [100]}])
    for _ in range(2):
        g.replay()
        torch.testing.assert_close(out.cpu().float(), reference(100), rtol=2e-2, atol=2e-3)
    with pytest.raises(ValueError, match="entries"):
        g.update([{"actual_seq_lengths_kv": [5]}, {"actual_seq_lengths_kv": [6]}])
    other = torch.npu.NPUGraph()
    assert other.graph_dispatch_mode.update_stream == g.graph_dispatch_mode.update_stream
    with pytest.raises(RuntimeError, match="no op with a graph handler"):
        other.update([{}])


def test_graph_handlers_register_user_ops():
    @torch.npu.register_npu_graph_handler(["my_graph_op.default"])
    class MyHandler(torch.npu.NpuGraphOpHandler):
        UPDATE_SPECS = {"my_graph_op.default": [("arg", 1, "scale")]}

    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS
    assert _NPU_GRAPH_OP_HANDLERS["my_graph_op.default"] is MyHandler
    with pytest.raises(TypeError):
        torch.npu.register_npu_graph_handler("x")(object)
    del _NPU_GRAPH_OP_HANDLERS["my_graph_op.default"]


def test_replays_draw_what_eager_draws_from_the_same_generator_state():
    def body():
        a = torch.rand(64, device="npu")
        state = torch.npu.get_rng_state()
        b = torch.randn(64, device="npu")
        torch.npu.set_rng_state(state)  # as activation checkpointing does: b's draw again
        c = torch.randn(64, device="npu")
        d = torch.empty(64, device="npu").exponential_()  # the generic executor's random path
        return a, b, c, d

    torch.npu.manual_seed(7)
    eager = [t.cpu() for t in body()]
    eager_next = torch.rand(8, device="npu").cpu()
    torch.npu.manual_seed(7)
    g, outs = capture(body)
    torch.npu.manual_seed(7)
    g.replay()
    replayed = [t.cpu() for t in outs]
    for e, r in zip(eager, replayed):
        assert torch.equal(e, r)
    assert torch.equal(replayed[1], replayed[2])
    assert torch.equal(torch.rand(8, device="npu").cpu(), eager_next), "a replay advances the generator as eager"


def test_generators_in_captures():
    gen = torch.Generator(device="npu")
    gen.manual_seed(3)
    g = torch.npu.NPUGraph()
    g.register_generator_state(gen)
    out = capture(lambda: None)[1]  # an unrelated capture leaves the generator alone
    with torch.npu.graph(g):
        out = torch.rand(16, device="npu", generator=gen)
    ref_gen = torch.Generator(device="npu")
    ref_gen.manual_seed(3)
    ref = torch.rand(16, device="npu", generator=ref_gen).cpu()
    gen.manual_seed(3)
    g.replay()
    assert torch.equal(out.cpu(), ref)
    with pytest.raises(RuntimeError, match="same as the original seed"):
        with torch.npu.graph(torch.npu.NPUGraph()):
            torch.npu.manual_seed(torch.npu.initial_seed() + 1)
    with pytest.raises(ValueError, match="npu generator"):
        torch.npu.NPUGraph().register_generator_state(torch.Generator())


def test_profiler_shows_replayed_ops_inside_the_graph_launch(tmp_path):
    import glob
    import json

    import torch_npu

    x = torch.randn(64, device="npu")
    g, _ = capture(lambda: torch.relu(x * 2 + 1))
    prof = torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)))
    prof.start()
    g.replay()
    torch.npu.synchronize()
    prof.stop()
    (trace,) = glob.glob(str(tmp_path / "**" / "trace_view.json"), recursive=True)
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = [e for e in events if e.get("ph") == "X"]
    (launch,) = [e for e in spans if str(e.get("name", "")).startswith("graph launch")]
    ops = [e for e in spans if e.get("name") in ("aclnnMuls", "aclnnAdds", "aclnnRelu")]
    assert sorted(e["name"] for e in ops) == ["aclnnAdds", "aclnnMuls", "aclnnRelu"]
    for op in ops:  # inside the launch's span
        assert float(launch["ts"]) <= float(op["ts"]) + 1e-3
        assert float(op["ts"]) + float(op["dur"]) <= float(launch["ts"]) + float(launch["dur"]) + 1e-3


def test_super_kernel_scopes_make_their_tasks_one_task_of_the_graph(tmp_path):
    x = torch.randn(16, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        torch.npu.super_kernel_scope_begin("outer")
        a = x * 2
        torch.npu.super_kernel_scope_begin("inner")
        b = a + 1
        torch.npu.super_kernel_scope_end("inner")
        c = torch.relu(b)
        torch.npu.super_kernel_scope_end("outer")
        d = c - 1
    assert g._task_count() == 2  # the outer scope, then the subtraction
    g.replay()
    torch.testing.assert_close(d.cpu(), torch.relu(x.cpu() * 2 + 1) - 1)
    with pytest.raises(RuntimeError, match="non-blank"):
        torch.npu.super_kernel_scope_begin("   ")
    with pytest.raises(RuntimeError, match="without a matching"):
        torch.npu.super_kernel_scope_end()
    g.super_kernel_optimize(optimize_options={"stream_fusion": 1, "dcci_before_kernel_start": ["k"],
                                              "aggressive_opt_strategies": {"event_breaker_bypass": 1}},
                            debug_options={"debug_sync_all": 0})
    for bad in ("invalid", {"invalid_key": 1}, {"stream_fusion": "x"}, {"dcci_after_kernel_end": ["ok", None]},
                {"aggressive_opt_strategies": {"nope": 1}}):
        with pytest.raises(RuntimeError):
            g.super_kernel_optimize(optimize_options=bad)


def test_reduce_overhead_replays_compiled_graphs_and_says_why_it_does_not():
    from torch_npu.dynamo.npugraphs import npugraph_stats

    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu().eval()
    model.load_state_dict({k: v.npu() for k, v in cpu_model.state_dict().items()})
    compiled = torch.compile(model, backend="npu", mode="reduce-overhead", dynamic=False)
    npugraph_stats.reset()
    with torch.no_grad():
        for batch in (4, 4, 4, 4, 6, 6, 6):
            x = torch.randn(batch, 8)
            out = compiled(x.npu())
            torch.testing.assert_close(out.cpu(), cpu_model(x), rtol=1e-4, atol=1e-5)
        held = compiled(torch.ones(4, 8, device="npu"))
        compiled(torch.zeros(4, 8, device="npu"))
        torch.testing.assert_close(held.cpu(), cpu_model(torch.ones(4, 8)), rtol=1e-4, atol=1e-5)  # outputs are copies
    assert npugraph_stats.recordings == 2  # one per input shape, recorded on its second call
    assert npugraph_stats.replays >= 5
    compiled(torch.randn(4, 8, device="npu"))  # grad mode on, parameters require grad: run ungraphed
    assert any("autograd" in reason for reason in npugraph_stats.skipped), npugraph_stats.skipped


def test_npugraph_ex_and_npugraphs_backends(tmp_path):
    from torch_npu.npu import npugraph_ex
    from torch_npu.dynamo.npugraphs import npugraph_stats

    def gelu_tanh(x):  # what a replacement rewrites
        return torch.nn.functional.gelu(x, approximate="tanh")

    def fn(x):
        return gelu_tanh(x * 2) + 1

    def search(x):
        return torch.nn.functional.gelu(x, approximate="tanh")

    def replace(x):
        return torch.nn.functional.gelu(x)  # erf form: a rewrite that shows in the result (up to 1e-3 apart)

    npugraph_ex.register_replacement(search, replace, [torch.empty(8, device="npu")])
    x = torch.randn(8)
    npugraph_stats.reset()
    with torch.no_grad():
        compiled = torch.compile(fn, backend="npugraph_ex")
        for _ in range(3):
            out = compiled(x.npu())
        torch.testing.assert_close(out.cpu(), torch.nn.functional.gelu(x * 2) + 1, rtol=1e-5, atol=1e-5)
        assert npugraph_stats.replays >= 1
        plain = torch.compile(lambda t: torch.relu(t) * 3, backend="npugraphs")
        for _ in range(3):
            y = plain(x.npu())
        torch.testing.assert_close(y.cpu(), torch.relu(x) * 3)
    # Scopes: core limits and determinism for what runs inside, restored after.
    stream = torch.npu.current_stream()
    before = torch.npu.get_stream_limit(stream)
    with npugraph_ex.scope.limit_core_num(4, 2):
        assert torch.npu.get_stream_limit(stream)["vector_core_num"] == 2
    assert torch.npu.get_stream_limit(stream) == before
    # The compile cache: a second compile of the same function loads what the first saved.
    cached = npugraph_ex.inference.cache_compile(lambda t: t.sin() + t.cos(), cache_dir=str(tmp_path))
    with torch.no_grad():
        torch.testing.assert_close(cached(x.npu()).cpu(), x.sin() + x.cos())
    assert (tmp_path / cached.cache_path.split("/")[-1]).exists()
    text = npugraph_ex.inference.readable_cache(cached.cache_path, print_output=False)
    assert "bytes" in text and "artifact" in text

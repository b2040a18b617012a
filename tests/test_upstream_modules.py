"""Modules at upstream torch_npu's paths, by what they do: torch_npu.jit's fast-gelu rewrite,
torch_npu.multiprocessing.reductions' round trips, the NPU_TENSORPIPE RPC backend and its options,
torch_npu.distributed.run's arguments, torch_npu.utils.profiler.Profile, profiler_interface and the
testing sample generators (the 2-rank DTensor / FSDP / pipelining modules: test_distributed.py)."""

import json
import os
import subprocess
import sys
import textwrap
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_npu


def _fast_gelu_cpu(x):
    # npu_fast_gelu's formula: x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))
    return x / (1 + torch.exp(-1.702 * x.abs())) * torch.exp(0.851 * (x - x.abs()))


class _GeluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return F.gelu(self.lin(x))


def test_jit_optimize_rewrites_gelu_to_npu_fast_gelu():
    torch.manual_seed(0)
    net = _GeluNet().eval()
    x = torch.randn(4, 8)
    lin = nn.Linear(8, 8)
    lin.load_state_dict(net.lin.state_dict())
    scripted = torch.jit.script(net.npu())
    assert "aten::gelu" in str(scripted.graph)
    assert torch_npu.jit.optimize(scripted) is None
    graph = str(scripted.graph)
    assert "npu::npu_fast_gelu" in graph and "aten::gelu" not in graph, graph
    out = scripted(x.npu()).cpu()
    torch.testing.assert_close(out, _fast_gelu_cpu(lin(x)).detach(), rtol=1e-4, atol=1e-4)


def test_jit_fast_gelu_pass_on_a_script_function_and_bad_input():
    @torch.jit.script
    def f(x):
        return F.gelu(x) + F.gelu(x, approximate="tanh")

    torch_npu.jit.fusion_pass.fast_gelu.fast_gelu_pass(f)
    graph = str(f.graph)
    assert graph.count("npu::npu_fast_gelu") == 1 and graph.count("aten::gelu") == 1, graph  # tanh gelu stays
    x = torch.randn(16)
    torch.testing.assert_close(f(x.npu()).cpu(), _fast_gelu_cpu(x) + F.gelu(x, approximate="tanh"),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="ScriptModule or ScriptFunction"):
        torch_npu.jit.optimize(_GeluNet())


def _round_trip(obj):
    return ForkingPickler.loads(ForkingPickler.dumps(obj))


def test_reductions_round_trip_views_parameters_storages_and_events():
    base = torch.arange(24., device="npu").reshape(4, 6)
    view = base[1:, ::2]
    got = _round_trip(view)
    assert got.device == view.device and got.stride() == view.stride() and got.storage_offset() == view.storage_offset()
    assert torch.equal(got.cpu(), view.cpu())
    got.fill_(0)
    assert base.sum().item() == 276  # a copy: the sender's tensor is untouched

    param = nn.Parameter(torch.randn(3, device="npu:1"))
    got = _round_trip(param)
    assert type(got) is nn.Parameter and got.requires_grad and got.device == torch.device("npu", 1)
    assert torch.equal(got.detach().cpu(), param.detach().cpu())

    storage = torch.tensor([1., 2.], device="npu").untyped_storage()
    got = _round_trip(storage)
    assert got.device.type == "npu" and bytes(got.cpu()) == bytes(storage.cpu())

    event = torch.npu.Event()
    event.record()
    got = _round_trip(event)
    assert isinstance(got, torch.npu.Event) and got.query()

    x = torch.randn(2, device="npu", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        _round_trip(x)
    from torch_npu.multiprocessing.reductions import rebuild_npu_tensor
    with pytest.raises(ValueError, match="holds 3 bytes, expected 8"):
        rebuild_npu_tensor(torch.Tensor, (2,), (1,), 0, torch.UntypedStorage, torch.float32, "npu:0", b"abc", 8, 0,
                           False, None, None, None, False)


def test_rpc_options_check_npu_devices_and_maps():
    from torch_npu.distributed.rpc import NPUTensorPipeRpcBackendOptions

    opts = NPUTensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=30.0, devices=[0, "npu:1"],
                                          device_maps={"w1": {0: 1}})
    assert opts.devices == [torch.device("npu", 0), torch.device("npu", 1)]
    assert opts.device_maps == {"w1": {torch.device("npu", 0): torch.device("npu", 1)}}
    assert opts.num_worker_threads == 4 and opts.rpc_timeout == 30.0
    opts.set_device_map("w1", {1: 0})
    assert opts.device_maps["w1"][torch.device("npu", 1)] == torch.device("npu", 0)
    with pytest.raises(ValueError, match="1-to-1"):
        opts.set_device_map("w1", {0: 0})
    with pytest.raises(ValueError, match="1-to-1"):
        NPUTensorPipeRpcBackendOptions(device_maps={"w1": {0: 1, 1: 1}})
    with pytest.raises(ValueError, match="must be npu devices"):
        NPUTensorPipeRpcBackendOptions(devices=["cpu"])
    with pytest.raises(TypeError):
        NPUTensorPipeRpcBackendOptions(4)  # keyword-only, as upstream


def test_rpc_npu_tensorpipe_backend_runs_calls(tmp_path):
    script = tmp_path / "rpc_worker.py"
    script.write_text(textwrap.dedent("""
        import os, sys, torch, torch_npu
        import torch.distributed.rpc as rpc
        from torch_npu.distributed.rpc import NPUTensorPipeRpcBackendOptions

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
        try:
            rpc.init_rpc("w0", rank=0, world_size=1, backend=rpc.backend_registry.BackendType.NPU_TENSORPIPE,
                          rpc_backend_options=NPUTensorPipeRpcBackendOptions(devices=["npu:0"]))
        except ValueError as e:
            assert "send npu tensors as .cpu()" in str(e), e
        rpc.init_rpc("w0", rank=0, world_size=1, backend=rpc.BackendType.NPU_TENSORPIPE,
                      rpc_backend_options=NPUTensorPipeRpcBackendOptions(num_worker_threads=4))
        x = torch.randn(3, device="npu")
        got = rpc.rpc_sync("w0", torch.mul, args=(x.cpu(), 2)).npu()
        assert torch.equal(got.cpu(), x.cpu() * 2)
        rpc.shutdown()
        print("rpc ok")
    """))
    sys.path.insert(0, os.path.dirname(__file__))
    from dist_launch import base_env, free_port
    proc = subprocess.run([sys.executable, str(script), str(free_port())], cwd=tmp_path, env=base_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "rpc ok" in proc.stdout, proc.stdout + proc.stderr


def test_run_parse_args_takes_torchruns_arguments_and_the_tiered_store_flag():
    from torch_npu.distributed.run import parse_args

    args = parse_args(["--nproc_per_node=2", "--enable_tiered_parallel_tcpstore=true", "train.py", "--lr", "1"])
    assert args.nproc_per_node == "2" and args.enable_tiered_parallel_tcpstore is True
    assert args.training_script == "train.py" and args.training_script_args == ["--lr", "1"]
    assert parse_args(["train.py"]).enable_tiered_parallel_tcpstore is False
    with pytest.raises(SystemExit):
        parse_args(["--enable_tiered_parallel_tcpstore=maybe", "train.py"])


def test_utils_profiler_profile_writes_the_chosen_step_then_exits(tmp_path):
    script = tmp_path / "steps.py"
    script.write_text(textwrap.dedent(f"""
        import torch, torch_npu
        from torch_npu.utils.profiler import Profile
        prof = Profile(start_step=2, save_path={str(tmp_path / 'out')!r}, profile_type="TORCH", use_npu=True)
        assert Profile() is prof  # one instance per process
        x = torch.ones(64, 64, device="npu")
        for step in range(5):
            prof.start()
            print("step", step, flush=True)
            y = (x @ x).relu().sum()
            torch.npu.synchronize()
            prof.end()
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["step", "0", "step", "1"], proc.stdout  # exits after the profiled step
    traces = list((tmp_path / "out").glob("torch_prof_*.json"))
    assert len(traces) == 1
    events = json.loads(traces[0].read_text())["traceEvents"]
    assert any("matmul" in e.get("name", "") for e in events)


def test_utils_profiler_profile_checks_its_arguments():
    from torch_npu.utils.profiler import Profile

    cls = Profile.__wrapped__
    off = cls(profile_type=None)
    off.start()
    off.end()  # disabled: steps pass through
    with pytest.raises(RuntimeError, match="no step started"):
        off.end()
    with pytest.raises(ValueError, match="profile_type"):
        cls(profile_type="GE")
    with pytest.raises(ValueError, match="not arguments of the TORCH profiler"):
        cls(profile_type="TORCH", activities=[])


def test_profiler_interface_supported_activities():
    from torch_npu.profiler.profiler_interface import supported_activities

    assert supported_activities() == {torch_npu.profiler.ProfilerActivity.CPU,
                                      torch_npu.profiler.ProfilerActivity.NPU}
    assert torch_npu.profiler.supported_activities() == supported_activities()


def test_common_methods_invocations_samples_run_on_npu():
    from torch.testing._internal.common_methods_invocations import op_db

    from torch_npu.testing.common_methods_invocations import sample_inputs_median_custom, \
        sample_inputs_normal_tensor_second

    median = next(op for op in op_db if op.name == "median")
    samples = list(sample_inputs_median_custom(median, "npu", torch.float32, False))
    assert [tuple(s.input.shape) for s in samples[:2]] == [(2, 0), (0, 2)]
    checked = 0
    for s in samples[2:]:
        if any(isinstance(a, (tuple, list)) for a in [*s.args, *s.kwargs.values()]):
            continue  # multi-dim reduction samples: median takes one dim
        checked += 1
        got = torch.median(s.input, *s.args, **s.kwargs)
        ref = torch.median(s.input.cpu(), *s.args, **s.kwargs)
        torch.testing.assert_close(got[0].cpu() if isinstance(got, tuple) else got.cpu(),
                                   ref[0] if isinstance(ref, tuple) else ref)
    assert checked >= 3
    normal = list(sample_inputs_normal_tensor_second(None, "npu", torch.float32, False))
    assert len(normal) == 3 and all(s.input.device.type == "npu" for s in normal)
    assert isinstance(normal[0].args[0], float) and isinstance(normal[2].args[0], torch.Tensor)

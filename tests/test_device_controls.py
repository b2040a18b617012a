"""torch.npu's device controls: cube / vector core limits of a device and a stream (and the thread share
they leave a stream's kernels), the op timeout (the watchdog), the deterministic level, stress detection,
memory error checks, the BLAS handle and the expandable segments' address cache."""

import math
import warnings

import pytest
import torch

import torch_npu

FULL = {"cube_core_num": 24, "vector_core_num": 48}


@pytest.fixture
def full_limits():
    """Leaves npu:0 and the default stream with their full core counts."""
    props = torch.npu.get_device_properties(0)
    full = {"cube_core_num": props.cube_core_num, "vector_core_num": props.vector_core_num}
    yield full
    torch.npu.set_device_limit(0, full["cube_core_num"], full["vector_core_num"])
    torch.npu.reset_stream_limit(torch.npu.current_stream())


def worker_threads(stream):
    return torch_npu._C._stream_worker_threads(stream.stream_id, stream.device_index, stream.device_type)


def test_device_and_stream_limits_as_torch_npu_reports_them(full_limits):
    assert torch.npu.get_device_limit(0) == full_limits == FULL
    torch.npu.set_device_limit(0, 12, 24)
    assert torch.npu.get_device_limit(0) == {"cube_core_num": 12, "vector_core_num": 24}
    torch.npu.set_device_limit(0, vector_num=30)  # -1 leaves the cube limit as it is
    assert torch.npu.get_device_limit(0) == {"cube_core_num": 12, "vector_core_num": 30}
    s1, s2 = torch.npu.current_stream(), torch.npu.Stream()
    torch.npu.set_stream_limit(s1, 13, 25)
    torch.npu.set_stream_limit(s2, 14, 26)
    assert torch.npu.get_stream_limit(s1) == {"cube_core_num": 13, "vector_core_num": 25}
    assert torch.npu.get_stream_limit(s2) == {"cube_core_num": 14, "vector_core_num": 26}
    torch.npu.reset_stream_limit(s1)
    assert torch.npu.get_stream_limit(s1) == {"cube_core_num": 12, "vector_core_num": 30}  # the device's


@pytest.mark.parametrize("bad", ["0", 0.0, None, True, False])
def test_limits_reject_a_device_that_is_not_an_int(bad):
    with pytest.raises(TypeError, match="device must be an int"):
        torch.npu.set_device_limit(bad)
    with pytest.raises(TypeError, match="device must be an int"):
        torch.npu.get_device_limit(bad)


def test_limits_reject_out_of_range_values_and_non_streams(full_limits):
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.npu.get_device_limit(torch.npu.device_count())
    with pytest.raises(ValueError, match=r"cube_num must be in \[1, 24\]"):
        torch.npu.set_device_limit(0, 25)
    with pytest.raises(ValueError, match=r"vector_num must be in \[1, 48\]"):
        torch.npu.set_stream_limit(torch.npu.current_stream(), vector_num=0)
    with pytest.raises(AssertionError, match="stream cannot be None"):
        torch.npu.get_stream_limit(None)
    with pytest.raises(AssertionError, match="torch_npu.npu.Stream"):
        torch.npu.set_stream_limit("stream", 1, 1)
    assert torch.npu.get_device_limit(0) == full_limits  # nothing was changed by the failed calls


def test_vector_limit_sets_the_share_of_threads_a_streams_kernels_use(full_limits, deterministic):
    threads = torch.get_num_threads()
    stream = torch.npu.current_stream()
    share = lambda vector: max(1, min(threads, math.ceil(threads * vector / 48)))  # noqa: E731
    assert worker_threads(stream) == threads
    torch.npu.set_stream_limit(stream, vector_num=1)
    assert worker_threads(stream) == 1
    # Work launched before the call keeps running with the old share; results are unchanged.
    x = torch.randn(256, 256)
    assert torch.allclose((x.npu() @ x.npu()).cpu(), x @ x, rtol=1e-4, atol=1e-4)
    torch.npu.reset_stream_limit(stream)
    torch.npu.set_device_limit(0, vector_num=24)
    assert worker_threads(stream) == share(24)
    other = torch.npu.Stream()
    torch.npu.set_stream_limit(other, vector_num=48)  # a stream's own limit overrides the device's
    assert worker_threads(other) == threads
    assert worker_threads(stream) == share(24)


def test_op_timeout_checks_its_argument_as_torch_npu_does():
    with pytest.raises(ValueError, match="can't convert negative value to unsigned int"):
        torch.npu.set_op_timeout_ms(-1)
    with pytest.raises(OverflowError, match="Overflow when unpacking"):
        torch.npu.set_op_timeout_ms(2 ** 32)
    with pytest.raises(TypeError, match="must be an int"):
        torch.npu.set_op_timeout_ms(1.5)
    before = torch_npu._C._npu_get_op_timeout_ms()
    torch.npu.set_op_timeout_ms(120000)
    assert torch_npu._C._npu_get_op_timeout_ms() == 120000
    torch.npu.set_op_timeout_ms(before)


def test_deterministic_level_switches_deterministic_algorithms():
    before = torch.are_deterministic_algorithms_enabled()
    try:
        with pytest.warns(UserWarning, match="use_deterministic_algorithms"):
            torch.npu.set_deterministic_level(1)
        assert torch.are_deterministic_algorithms_enabled() and torch.npu._get_deterministic_level() == 1
        # Bitwise reproducible: a reduction-heavy op twice.
        x = torch.randn(512, 512, device="npu")
        assert torch.equal(x.sum(0).cpu(), x.sum(0).cpu())
        torch.npu.set_deterministic_level(0)
        assert not torch.are_deterministic_algorithms_enabled() and torch.npu._get_deterministic_level() == 0
        torch.use_deterministic_algorithms(True)   # changed behind its back: the level follows
        assert torch.npu._get_deterministic_level() == 1
        with pytest.raises(ValueError, match="batch-invariant"):
            torch.npu.set_deterministic_level(2)
        with pytest.raises(ValueError, match="must be 0, 1 or 2"):
            torch.npu.set_deterministic_level(3)
        with pytest.raises(TypeError, match="must be an int"):
            torch.npu.set_deterministic_level("1")
    finally:
        torch.use_deterministic_algorithms(before)


def test_health_checks_answer_as_the_software_npu_can():
    with pytest.warns(UserWarning, match="NPU does not use blas handle"):
        assert torch.npu.current_blas_handle() is None
    assert torch.npu.check_uce_in_memory(0) == 0
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.npu.check_uce_in_memory(99)
    assert torch.npu.stress_detect() == 0
    with pytest.warns(UserWarning, match="Detect_type should be"):
        assert torch.npu.stress_detect("xyz") == 1
    with pytest.warns(UserWarning, match="torch.distributed should be initialized"):
        assert torch.npu.stress_detect("hccs") == 1


def test_stress_detect_fails_when_the_device_fails_its_workload(run_python):
    proc = run_python("""
        import warnings, torch, torch_npu
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print("result", torch.npu.stress_detect("aic"))
        print("warned", any("check failed" in str(w.message) for w in caught))
    """, env={"NPU_SIM_FAULT": "task_fail:op=mm"}, timeout=120)
    assert "result 1" in proc.stdout and "warned True" in proc.stdout, proc.stdout + proc.stderr


def test_stress_detect_hccs_sums_over_the_process_group(run_python):
    proc = run_python("""
        import os, tempfile, torch, torch_npu, torch.distributed as dist
        store = dist.FileStore(os.path.join(tempfile.mkdtemp(), "store"), 1)
        dist.init_process_group("hccl", store=store, rank=0, world_size=1)
        print("result", torch.npu.stress_detect("hccs"))
        dist.destroy_process_group()
    """, timeout=120)
    assert "result 0" in proc.stdout, proc.stdout + proc.stderr


def test_empty_virt_addr_cache_keeps_ordinary_segments(quiet_allocator):
    x = torch.empty(16 << 20, dtype=torch.uint8, device="npu")
    del x
    reserved = torch.npu.memory_reserved()
    assert reserved >= 16 << 20
    torch.npu.empty_virt_addr_cache()
    assert torch.npu.memory_reserved() == reserved  # no expandable segments: nothing to unmap
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() < reserved


def test_empty_virt_addr_cache_unmaps_expandable_segments(run_python):
    proc = run_python("""
        import torch, torch_npu
        x = torch.empty(64 << 20, dtype=torch.uint8, device="npu")
        y = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
        del x
        torch.npu.synchronize()
        before = torch.npu.memory_reserved()
        torch.npu.empty_virt_addr_cache()
        after = torch.npu.memory_reserved()
        y.fill_(1)
        print("before", before, "after", after, "live", int(y.sum()))
    """, env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"})
    before, after, live = (int(v) for v in proc.stdout.split()[1::2])
    assert before >= 64 << 20 and after < before - (60 << 20) and live == 1 << 20, proc.stdout


def test_collect_env_reports_torch_npu_cann_and_the_devices(run_python):
    from torch_npu.utils import collect_env

    info = collect_env.get_env_info()
    assert info.torch_version == torch.__version__ and info.torch_npu_version == torch_npu.__version__
    assert info.cann_version == torch_npu.npu.utils.get_cann_version()
    text = collect_env.pretty_str(info)
    assert f"Torch-npu version: {torch_npu.__version__}" in text
    assert f"npu:0: {torch.npu.get_device_name(0)}" in text and "cube" in text
    proc = run_python("import runpy; runpy.run_module('torch_npu.utils.collect_env', run_name='__main__')")
    assert "Collecting environment information..." in proc.stdout and "PyTorch version:" in proc.stdout


def test_amp_availability_and_optimizer_modules_at_torch_npu_paths():
    from torch_npu.npu.amp.common import amp_definitely_not_available
    from torch_npu.optim.npu_fused_adamw import NpuFusedAdamW
    from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase

    assert amp_definitely_not_available() is (not torch.npu.is_available())
    assert NpuFusedAdamW is torch_npu.optim.NpuFusedAdamW and issubclass(NpuFusedAdamW, NpuFusedOptimizerBase)


def test_sync_launch_stream_finishes_each_op_before_the_launch_returns():
    s = torch.npu.SyncLaunchStream()
    assert isinstance(s, torch.npu.Stream) and s == torch.npu.SyncLaunchStream(0) and s != torch.npu.Stream()
    x = torch.randn(768, 768, device="npu")
    with torch.npu.stream(s):
        for _ in range(3):
            y = x @ x + 1
            assert s.query()  # nothing left queued: the op already ran
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu() + 1, rtol=1e-4, atol=1e-3)


def test_sync_launch_stream_raises_a_failing_op_at_its_launch(run_python):
    proc = run_python("""
        import torch, torch_npu
        x = torch.ones(4, 4, device="npu")
        y = torch.mm(x, x)                          # the default stream: fails later, at the sync
        print("default stream launch returned")
        try:
            torch.npu.synchronize()
        except RuntimeError:
            print("default stream failed at the sync")
        with torch.npu.stream(torch.npu.SyncLaunchStream()):
            try:
                torch.mm(x, x)
            except RuntimeError as e:
                print("sync-launch stream failed at the launch:", "aclnnMm" in str(e))
        print("after", (x + 1).cpu().sum().item())
    """, env={"NPU_SIM_FAULT": "task_fail:op=mm:count=2"})
    out = proc.stdout
    assert "default stream launch returned" in out and "default stream failed at the sync" in out, out
    assert "sync-launch stream failed at the launch: True" in out and "after 32.0" in out, out


def test_error_code_suffixes_as_torch_npu_formats_them(monkeypatch):
    from torch_npu.utils._error_code import ErrCode, dist_error, ops_error, pta_error

    assert ErrCode.PARAM.code == 1 and ErrCode.NOT_SUPPORT.msg == "feature not supported"
    text = ops_error(ErrCode.PARAM)
    assert text.startswith("\n[ERROR] ") and text.endswith("ERR01001 OPS invalid parameter")
    assert f"PID:{__import__('os').getpid()}" in text
    assert pta_error(ErrCode.TYPE).endswith("ERR00002 PTA invalid type")
    assert dist_error(ErrCode.HCCL).endswith("ERR02200 DIST call hccl api failed")
    monkeypatch.setenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "1")
    assert ops_error(ErrCode.PARAM) == ""

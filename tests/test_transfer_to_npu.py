"""torch_npu.contrib.transfer_to_npu: CUDA code runs unchanged on npu, TorchScript and torch.compile keep working,
libraries that inspect torch.cuda see the truth, and undo() puts everything back."""

import importlib
import io
import sys

import pytest
import torch
import torch.distributed as dist

from torch_npu.contrib import _transfer_devices as tdev


@pytest.fixture
def transfer():
    module = importlib.import_module("torch_npu.contrib.transfer_to_npu")
    module.apply()
    yield module
    module.undo()


def test_factories_methods_and_devices(transfer):
    ref = torch.arange(6, dtype=torch.float32).view(2, 3)
    for dev in ("cuda", "cuda:1", torch.device("cuda", 1), torch.device("cuda")):
        t = torch.arange(6, dtype=torch.float32, device=dev).view(2, 3)
        assert t.device.type == "npu" and torch.equal(t.cpu(), ref)
    assert torch.zeros(2, device="cuda:1").device == torch.device("npu", 1)
    assert torch.zeros(2, device=1).device == torch.device("npu", 1)  # integer ids are the accelerator's
    assert torch.tensor([1, 2], device="cuda").device.type == "npu"
    assert torch.zeros_like(ref, device="cuda").device.type == "npu"
    x = ref.cuda()
    assert x.is_cuda and x.is_npu and torch.equal(ref.cuda(1).cpu(), ref) and ref.cuda(1).device.index == 1
    assert ref.to("cuda:1").device == torch.device("npu", 1)
    assert ref.to(torch.device("cuda", 0), torch.float64).dtype == torch.float64
    assert ref.to(device="cuda").device.type == "npu"
    assert x.new_zeros(3, device="cuda:1").device == torch.device("npu", 1)
    m = torch.nn.Linear(3, 2).cuda()
    assert next(m.parameters()).device.type == "npu"
    assert next(torch.nn.Linear(3, 2).to("cuda:1").parameters()).device == torch.device("npu", 1)
    assert torch.UntypedStorage(8).cuda().device.type == "npu"


def test_torch_cuda_namespace_is_npu(transfer):
    assert torch.cuda.is_available() and torch.cuda.device_count() == torch.npu.device_count()
    torch.cuda.set_device(torch.device("cuda:1"))
    assert torch.cuda.current_device() == 1 == torch.npu.current_device()
    torch.cuda.set_device(0)
    with torch.cuda.device("cuda:1"):
        assert torch.zeros(1, device="cuda").device.index == 1
    assert torch.cuda.get_device_name(0) == torch.npu.get_device_name(0)
    props = torch.cuda.get_device_properties("cuda:0")
    assert props.total_memory == torch.npu.mem_get_info(0)[1] and props.name
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        y = torch.ones(4, device="cuda") * 2
    torch.cuda.current_stream().wait_stream(s)
    e = torch.cuda.Event(enable_timing=True)
    e.record()
    torch.cuda.synchronize()
    assert e.query() and torch.equal(y.cpu(), torch.full((4,), 2.0))
    assert torch.cuda.memory_allocated() == torch.npu.memory_allocated()
    torch.cuda.manual_seed(7)
    a = torch.randn(5, device="cuda").cpu()
    torch.npu.manual_seed(7)
    assert torch.equal(a, torch.randn(5, device="npu").cpu())
    t = torch.cuda.FloatTensor([1, 2])
    assert t.device.type == "npu" and t.dtype == torch.float32
    assert torch.cuda.DoubleTensor([1]).dtype == torch.float64  # double stays double


def test_amp_runs_on_npu(transfer):
    from torch.cuda.amp import GradScaler, autocast

    assert autocast is torch.npu.amp.autocast and GradScaler is torch.npu.amp.GradScaler
    a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    with torch.cuda.amp.autocast():
        assert (a @ b).dtype == torch.float16
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert (a @ b).dtype == torch.bfloat16
    with torch.autocast(device_type="cuda"):
        assert (a @ b).dtype == torch.float16
    for scaler in (torch.amp.GradScaler(), torch.amp.GradScaler("cuda"), torch.cuda.amp.GradScaler()):
        assert scaler._device == "npu"
    model = torch.nn.Linear(4, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    with torch.autocast("cuda"):
        loss = model(a).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0 and model.weight.grad.device.type == "npu"


def _save_as_cuda_checkpoint(obj, path):
    """A checkpoint whose storages are tagged "cuda:0", as torch.save on a GPU writes them."""
    tagger = (0, lambda storage: "cuda:0" if storage.device.type == "npu" else None, lambda obj, loc: None)
    torch.serialization._package_registry.insert(0, tagger)
    try:
        torch.save(obj, path)
    finally:
        torch.serialization._package_registry.remove(tagger)


def test_torch_load_of_cuda_checkpoints(transfer, tmp_path):
    ref = torch.arange(5.0)
    path = tmp_path / "ckpt.pt"
    _save_as_cuda_checkpoint({"w": ref.to("npu")}, path)
    assert torch.load(path)["w"].device == torch.device("npu", 0)  # no map_location: cuda -> npu
    assert torch.load(path, map_location="cuda:1")["w"].device == torch.device("npu", 1)
    assert torch.load(path, map_location={"cuda:0": "cuda:1"})["w"].device == torch.device("npu", 1)
    loaded = torch.load(path, map_location=torch.device("cpu"))["w"]
    assert loaded.device.type == "cpu" and torch.equal(loaded, ref)
    transfer.undo()
    with pytest.raises(RuntimeError):
        torch.load(path)  # without the transfer a CUDA checkpoint cannot load here


def test_distributed_backend_names(transfer):
    assert dist.Backend("nccl") == "hccl" and dist.Backend("gloo") == "gloo"
    assert tdev.backend_name("cpu:gloo,cuda:nccl") == "cpu:gloo,npu:hccl"
    assert tdev.backend_name("NCCL") == "hccl"
    if hasattr(dist, "is_hccl_available"):
        assert dist.is_nccl_available() == dist.is_hccl_available()
    # init_process_group gets hccl: it either starts an hccl group or fails naming hccl, never nccl.
    try:
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    except Exception as e:  # noqa: BLE001  (c10d raises AssertionError for an unknown backend)
        assert not dist.is_initialized()
        assert "hccl" in str(e).lower() and "nccl" not in str(e).lower().replace("hccl", "")
    else:
        try:
            assert dist.get_backend() == "hccl"
        finally:
            dist.destroy_process_group()


def test_profiler_cuda_activity_records(transfer):
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(8, 8, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (x @ x).sum().item()
    assert any("mm" in e.key for e in prof.key_averages())
    with torch.autograd.profiler.profile(use_cuda=True) as p2:
        (x + 1).cpu()
    assert any("add" in e.key for e in p2.key_averages())


def test_torchscript_and_compile_keep_working(transfer):
    @torch.jit.script
    def scripted(a: torch.Tensor) -> torch.Tensor:
        return torch.zeros(a.shape, dtype=a.dtype) + torch.ones_like(a) * a

    x = torch.arange(4.0)
    assert torch.equal(scripted(x), x)
    assert "aten::zeros" in str(scripted.graph)

    class M(torch.nn.Module):
        def forward(self, a):
            return torch.full(a.shape, 2.0) * a

    assert torch.equal(torch.jit.script(M())(x), 2 * x)
    compiled = torch.compile(lambda a: torch.ones(a.shape, device=a.device) + a, backend="eager", fullgraph=True)
    y = compiled(torch.arange(3.0, device="cuda"))
    assert y.device.type == "npu" and torch.equal(y.cpu(), torch.arange(3.0) + 1)


def test_third_party_view_of_torch_cuda(transfer):
    import torch.cuda.amp
    import torch.cuda.nvtx

    assert sys.modules["torch.cuda"] is torch.cuda  # the module object is never swapped
    assert torch.cuda.nvtx is sys.modules["torch.cuda.nvtx"]
    assert torch.version.cuda is None and not torch.backends.cudnn.is_available()
    # Compute capability is torch.npu's answer: None unless TORCH_NPU_DEVICE_CAPABILITY names one.
    assert torch.cuda.get_device_capability() == torch.npu.get_device_capability()
    assert torch.cuda.is_available is torch.npu.is_available


def test_undo_restores_everything(transfer):
    wrapped_zeros = torch.zeros
    transfer.undo()
    from torch.jit import _builtins

    assert torch.zeros is not wrapped_zeros and _builtins._find_builtin(wrapped_zeros) is None
    assert not torch.cuda.is_available()
    assert "cuda" not in vars(torch.Tensor) and "is_cuda" not in vars(torch.Tensor)
    assert not torch.ones(1).is_cuda
    with pytest.raises((AssertionError, RuntimeError)):
        torch.zeros(1, device="cuda")
    with pytest.raises(ValueError, match="Expected a npu device"):
        torch.npu.set_device("cuda:0")
    assert dist.Backend("nccl") == "nccl"
    transfer.apply()  # and again
    assert torch.zeros(1, device="cuda").is_npu


def test_prints_once_and_environment_switch(run_python):
    proc = run_python("""
        import torch
        import torch_npu.contrib.transfer_to_npu as t
        t.undo(); t.apply(); t.undo(); t.apply()
        print(torch.ones(2, device="cuda").device)
    """)
    assert proc.stdout.strip() == "npu:0"
    assert proc.stderr.count("transfer_to_npu: CUDA code runs on npu") == 1
    assert "torch.cuda.* -> torch.npu.*" in proc.stderr
    proc = run_python("""
        import torch
        m = torch.nn.Linear(2, 2).cuda()
        print(next(m.parameters()).device, torch.cuda.is_available())
    """, env={"TORCH_TRANSFER_TO_NPU": "1"})
    assert proc.stdout.strip() == "npu:0 True"


def test_banner_only_on_rank_zero(run_python):
    proc = run_python("import torch, torch_npu.contrib.transfer_to_npu", env={"RANK": "1"})
    assert "transfer_to_npu" not in proc.stderr


def test_report_lists_patched_areas(transfer):
    text = transfer._report(transfer._patches)
    assert "nccl -> hccl" in text and "ProfilerActivity.CUDA" in text and "undo()" in text
    buf = io.StringIO()
    print(text, file=buf)
    assert buf.getvalue().count("\n") >= 6


def test_generators_events_device_contexts_and_device_modules(transfer):
    g = torch.Generator("cuda")
    assert g.device.type == "npu" and isinstance(g, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator)  # existing generators still are ones
    g.manual_seed(3)
    a = torch.randn(4, device="cuda", generator=g)
    g2 = torch.Generator(device=torch.device("cuda", 0)).manual_seed(3)
    assert torch.equal(a.cpu(), torch.randn(4, device="npu", generator=g2).cpu())
    e = torch.Event(device="cuda:0", enable_timing=True)
    assert e.device.type == "npu"
    with torch.device("cuda"):
        t = torch.tensor([1.0, 2.0])
    assert t.is_npu
    assert torch.get_device_module("cuda:0") is torch.npu
    assert torch.fft.fftfreq(5, device="cuda").is_npu and torch.fft.rfftfreq(6, device="cuda").is_npu
    assert torch.cuda.default_generators is torch.npu.default_generators
    transfer.undo()
    assert torch.Generator is torch._C.Generator and type(torch.Event) is type  # the originals again
    assert torch.cuda.default_generators is not torch.npu.default_generators
    transfer.apply()


def test_process_group_nccl_is_hccl_with_options(transfer, tmp_path):
    from torch.distributed import ProcessGroupNCCL

    import torch_npu

    assert ProcessGroupNCCL is torch_npu._C._distributed_c10d.ProcessGroupHCCL
    opts = ProcessGroupNCCL.Options()
    opts.hccl_config = {"hccl_buffer_size": 200, "group_name": "g0"}
    dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, pg_options=opts)
    try:
        t = torch.ones(3, device="cuda")
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), torch.ones(3)) and opts.group_id != "" and opts._timeout is not None
    finally:
        dist.destroy_process_group()
    bad = ProcessGroupNCCL.Options()
    bad.hccl_config = {"hccl_buffer_sizes": 1}
    with pytest.raises(ValueError, match="unknown key 'hccl_buffer_sizes'"):
        dist.init_process_group("hccl", init_method=f"file://{tmp_path}/store2", rank=0, world_size=1,
                                pg_options=bad)
    if dist.is_initialized():
        dist.destroy_process_group()

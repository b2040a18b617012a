"""torch.utils.dumper: the HDF5 layout, load and replay, filters, statistics mode, steps, overflow
check and bad input, on CPU and npu, read back with h5py."""

import os
import textwrap

import h5py
import numpy as np
import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.tools.accucmp import compare_files
from torch_npu.utils.dump_file import DumpFileError, tensor_stats


def _mlp(dropout: float = 0.0):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16), torch.nn.GELU()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    return torch.nn.Sequential(*layers, torch.nn.Linear(16, 4))


def _step(model, x):
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss


def _ops(path):
    """(order, name, seqid, phase) of every op in a dump, in run order."""
    with h5py.File(path, "r") as f:
        return sorted((int(f[n][s].attrs["order"]), n, int(s), f[n][s].attrs["phase"]) for n in f for s in f[n])


def test_layout_and_attributes_cpu(tmp_path):
    model, x = _mlp(), torch.randn(3, 8)
    path = tmp_path / "cpu.h5"
    with torch.utils.dumper(use_dump=True, dump_path=str(path)):
        _step(model, x)
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "torch_npu.dumper" and f.attrs["complete"] and f.attrs["mode"] == "data"
        assert f.attrs["device"] == "cpu"
        first = f["addmm/0"]  # the first Linear: bias, input, weight.t()
        assert first.attrs["op"] == "aten::addmm" and first.attrs["phase"] == "forward"
        assert first.attrs["module"] == "Sequential.0"
        assert first.attrs["stack"].startswith("test_dumper.py:")
        np.testing.assert_array_equal(first["input/1"][()], x.numpy())
        np.testing.assert_array_equal(first["input/0"][()], model[0].bias.detach().numpy())
        expected = torch.nn.functional.linear(x, model[0].weight, model[0].bias).detach().numpy()
        np.testing.assert_allclose(first["output/0"][()], expected, rtol=1e-6)
        ds = first["output/0"]
        assert ds.attrs["dtype"] == "torch.float32" and list(ds.attrs["shape"]) == [3, 16]
        assert ds.attrs["max"] == pytest.approx(expected.max()) and ds.attrs["norm"] == pytest.approx(
            np.linalg.norm(expected), rel=1e-6)
        assert "gelu_backward" in f and f["gelu_backward/0"].attrs["phase"] == "backward"
    phases = {phase for *_, phase in _ops(path)}
    assert phases == {"forward", "backward"}


def test_npu_run_records_the_same_ops_as_cpu(tmp_path):
    model, x = _mlp(), torch.randn(3, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "cpu.h5")):
        _step(model, x)
    npu_model, npu_x = _mlp().npu(), x.npu()
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "npu.h5")):
        _step(npu_model, npu_x)
    strip = [(n, s, p) for _, n, s, p in _ops(tmp_path / "cpu.h5")]
    assert strip == [(n, s, p) for _, n, s, p in _ops(tmp_path / "npu.h5")]
    with h5py.File(tmp_path / "npu.h5", "r") as f:
        assert f.attrs["device"] == "npu:0"
    result = compare_files(str(tmp_path / "npu.h5"), str(tmp_path / "cpu.h5"), progress=False)
    assert result.unmatched == [] and result.likely_root_cause is None
    assert all(r.verdict == "Yes" for r in result.rows)


def test_load_feeds_recorded_inputs(tmp_path):
    """Loading replays the CPU's inputs: the npu run computes the CPU's gradients even though its
    own input and weights differ."""
    model, x = _mlp(), torch.randn(3, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "cpu.h5")):
        _step(model, x)
    npu_model = _mlp().npu()
    with torch.no_grad():
        for p in npu_model.parameters():
            p.add_(1.0)  # other weights: only the load makes the results agree
    with torch.utils.dumper(use_dump=True, load_file_path=str(tmp_path / "cpu.h5"),
                            dump_path=str(tmp_path / "npu.h5")):
        _step(npu_model, torch.randn(3, 8).npu())
    for cpu_p, npu_p in zip(model.parameters(), npu_model.parameters()):
        torch.testing.assert_close(npu_p.grad.cpu(), cpu_p.grad, rtol=1e-5, atol=1e-6)
    with h5py.File(tmp_path / "npu.h5", "r") as f, h5py.File(tmp_path / "cpu.h5", "r") as g:
        np.testing.assert_array_equal(f["addmm/0/input/1"][()], g["addmm/0/input/1"][()])


def test_load_replays_random_ops(tmp_path):
    model, x = _mlp(dropout=0.5), torch.randn(16, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "cpu.h5")):
        _step(model, x)
    with torch.utils.dumper(use_dump=True, load_file_path=str(tmp_path / "cpu.h5"),
                            dump_path=str(tmp_path / "npu.h5")):
        _step(_mlp(dropout=0.5).npu(), x.npu())
    result = compare_files(str(tmp_path / "npu.h5"), str(tmp_path / "cpu.h5"), progress=False)
    assert "native_dropout" in {op.name for op in result.ops}
    assert result.likely_root_cause is None, result.summary()


def test_in_place_ops_dump_their_input_before_the_op(tmp_path):
    a = torch.arange(4.0)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "d.h5")):
        a.add_(10)
    with h5py.File(tmp_path / "d.h5", "r") as f:
        np.testing.assert_array_equal(f["add_/0/input/0"][()], [0, 1, 2, 3])
        np.testing.assert_array_equal(f["add_/0/output/0"][()], [10, 11, 12, 13])


def test_filters_by_op_and_module(tmp_path):
    model, x = _mlp(), torch.randn(3, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "ops.h5"), ops=["addmm", "gelu"]):
        _step(model, x)
    with h5py.File(tmp_path / "ops.h5", "r") as f:
        assert sorted(f.keys()) == ["addmm", "gelu"] and sorted(f["addmm"].keys()) == ["0", "1"]
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "mod.h5"), modules=["2"]):
        _step(model, x)
    with h5py.File(tmp_path / "mod.h5", "r") as f:
        modules = {f[n][s].attrs["module"] for n in f for s in f[n]}
        assert modules == {"Sequential.2"}, modules


def test_statistics_mode_keeps_stats_not_data(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).npu()
    x = torch.randn(64, 256).npu()
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "full.h5")) as full:
        _step(model, x)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "stats.h5"), stats_only=True) as stats:
        _step(model, x)
    assert stats.size < full.size / 10, (stats.size, full.size)
    with h5py.File(tmp_path / "full.h5", "r") as f, h5py.File(tmp_path / "stats.h5", "r") as g:
        assert g.attrs["mode"] == "statistics"
        for name in ("addmm/3/output/0", "mm/0/input/0", "sum/1/output/0"):
            assert g[name].shape is None  # no data
            expected = tensor_stats(f[name][()])
            for key in ("max", "min", "mean", "norm"):
                assert g[name].attrs[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), (name, key)
            assert list(g[name].attrs["shape"]) == list(f[name].attrs["shape"])
    # Statistics dumps compare by statistics.
    result = compare_files(str(tmp_path / "stats.h5"), str(tmp_path / "full.h5"), progress=False)
    assert all(r.verdict == "Yes" for r in result.rows) and result.rows[0].message == "statistics only"
    with pytest.raises(DumpFileError, match="statistics only"):
        with torch.utils.dumper(load_file_path=str(tmp_path / "stats.h5")):
            pass


def test_step_selection(tmp_path):
    model, x = _mlp(), torch.randn(3, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "d.h5"), steps=[1], ops=["addmm"]) as dump:
        for _ in range(3):
            _step(model, x)
            dump.step()
    with h5py.File(tmp_path / "d.h5", "r") as f:
        assert sorted(f["addmm"].keys()) == ["0", "1"]
        assert {int(f["addmm"][s].attrs["step"]) for s in f["addmm"]} == {1}


def test_background_and_inline_writes_agree(tmp_path):
    x = torch.randn(3, 8)
    for name, background in (("bg.h5", True), ("inline.h5", False)):
        with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / name), background=background):
            _step(_mlp(), x)
    assert _ops(tmp_path / "bg.h5") == _ops(tmp_path / "inline.h5")


def test_size_printed_at_exit(tmp_path, capsys):
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "d.h5")) as dump:
        torch.ones(3).npu().mul(2)
    out = capsys.readouterr().out
    assert f"written to {tmp_path / 'd.h5'}" in out and " MB in " in out
    assert dump.size == os.path.getsize(tmp_path / "d.h5")


def test_check_overflow_fp16_model(tmp_path, capsys):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4)).npu().half()
    with torch.no_grad():
        model[2].weight.fill_(3000.0)  # fine alone, but 4 products of ~40000 leave float16's range
    x = (torch.ones(2, 4) * 10).npu().half()
    with torch.no_grad():
        model[0].weight.fill_(1.0)
    with torch.utils.dumper(check_overflow=True, dump_path=str(tmp_path), load_file_path="") as dump:
        model(x)
    out = capsys.readouterr().out
    assert len(dump.overflows) == 1, out
    assert "overflow in aten::addmm call #1 at test_dumper.py:" in out and "inf" in out
    files = [p for p in os.listdir(tmp_path) if p.endswith(".h5")]
    assert len(files) == 1 and files[0].startswith("overflow_")
    with h5py.File(tmp_path / files[0], "r") as f:
        assert list(f.keys()) == ["addmm"] and list(f["addmm"].keys()) == ["1"]
        assert np.isinf(f["addmm/1/output/0"][()]).any()


def test_inf_from_inf_inputs_is_not_an_overflow(capsys):
    x = torch.tensor([float("inf"), 1.0]).npu().half()
    with torch.utils.dumper(check_overflow=True) as dump:
        x * 2
        torch.zeros(3).npu().masked_fill(torch.tensor([True, False, True]).npu(), float("-inf"))
    assert dump.overflows == []


def test_bad_paths_and_files(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DumpFileError, match="cannot write .* does not exist"):
        with torch.utils.dumper(use_dump=True, dump_path=str(blocker / "d.h5")):
            pass
    with pytest.raises(DumpFileError, match="does not exist"):
        with torch.utils.dumper(load_file_path=str(tmp_path / "missing.h5")):
            pass
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(os.urandom(4096))
    with pytest.raises(DumpFileError, match="not a readable HDF5 file"):
        with torch.utils.dumper(load_file_path=str(corrupt)):
            pass
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = np.zeros(3)
    with pytest.raises(DumpFileError, match="not a torch.utils.dumper dump"):
        with torch.utils.dumper(load_file_path=str(tmp_path / "other.h5")):
            pass
    with pytest.raises(ValueError, match="use_dump=True needs dump_path"):
        torch.utils.dumper(use_dump=True)


def test_dump_of_another_model_is_refused(tmp_path):
    model, x = _mlp(), torch.randn(3, 8)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "small.h5")):
        _step(model, x)
    other = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).npu()
    other_x = torch.randn(5, 8).npu()
    with pytest.raises(DumpFileError, match=r"(?s)dumped from another model.*addmm call #0 input 0 with shape "
                                            r"\[16\], this run passes \[32\]"):
        with torch.utils.dumper(load_file_path=str(tmp_path / "small.h5")):
            _step(other, other_x)
    y = torch.ones(2).npu()
    with pytest.raises(DumpFileError, match="none of the ops .* matched"):
        with torch.utils.dumper(load_file_path=str(tmp_path / "small.h5")):
            y.exp()


def test_exception_in_the_block_leaves_no_file(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "d.h5")):
            torch.ones(2).npu().exp()
            1 / 0
    assert os.listdir(tmp_path) == []


def test_interrupted_dump_never_reads_as_valid(tmp_path, run_python):
    proc = run_python(f"""
        import os, torch, torch_npu
        with torch.utils.dumper(use_dump=True, dump_path={str(tmp_path / 'd.h5')!r}):
            torch.ones(1000).npu().exp()
            os._exit(3)   # killed mid-dump
    """, check=False)
    assert proc.returncode == 3
    assert not (tmp_path / "d.h5").exists()
    for leftover in os.listdir(tmp_path):  # the temporary file, if any, is refused
        with pytest.raises(DumpFileError):
            torch_npu.utils.dump_file.DumpFile(str(tmp_path / leftover))


def test_full_disk_gives_a_clear_error_and_statistics_still_fit(tmp_path, run_python):
    """A model too big to dump whole under a file-size limit: the data dump fails cleanly, the
    statistics dump of the same run fits."""
    proc = run_python(textwrap.dedent(f"""
        import os, resource, signal, torch, torch_npu
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, 400_000))
        def run(**kw):
            x = torch.ones(256, 256).npu()
            for _ in range(10):
                x = (x * 1.5).sigmoid()
        try:
            with torch.utils.dumper(use_dump=True, dump_path={str(tmp_path / 'd.h5')!r}):
                run()
        except RuntimeError as e:
            print("ERROR:", e)
        print("LEFT", os.listdir({str(tmp_path)!r}))
        with torch.utils.dumper(use_dump=True, dump_path={str(tmp_path / 's.h5')!r}, stats_only=True):
            run()
    """), check=False)
    assert "ERROR: dumper: writing" in proc.stdout and "failed" in proc.stdout, proc.stdout + proc.stderr
    assert "No dump file was left" in proc.stdout and "LEFT []" in proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(tmp_path) == ["s.h5"]
    with h5py.File(tmp_path / "s.h5", "r") as f:
        assert len(f["sigmoid"]) == 10 and f["sigmoid/9/output/0"].shape is None


def test_nested_dumpers_are_refused(tmp_path):
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "a.h5")):
        with pytest.raises(RuntimeError, match="already active"):
            with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "b.h5")):
                pass


@pytest.fixture
def internal_format():
    old = torch.npu.config.allow_internal_format
    torch.npu.config.allow_internal_format = True
    yield
    torch.npu.config.allow_internal_format = old


def test_private_format_tensors_are_dumped_as_logical_values(tmp_path, internal_format):
    """An NC1HWC0 tensor is dumped as its logical NCHW values (not the padded storage), with the
    format and the storage shape as attributes; loading feeds the op an NC1HWC0 input again."""
    torch.manual_seed(0)
    x = torch.randn(2, 20, 3, 3)   # 20 channels: C1 = 2 blocks of 16, 12 padding lanes
    a = torch_npu.npu_format_cast(x.npu(), torch_npu.Format.NC1HWC0)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "d.h5")):
        y = a.mul(3)
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "s.h5"), stats_only=True):
        a.mul(3)
    assert torch_npu.get_npu_format(y) == torch_npu.Format.NC1HWC0  # a new result takes the layout
    with h5py.File(tmp_path / "d.h5", "r") as f, h5py.File(tmp_path / "s.h5", "r") as g:
        ds = f["mul/0/input/0"]
        np.testing.assert_array_equal(ds[()], x.numpy())
        assert ds.attrs["npu_format"] == "NC1HWC0" and list(ds.attrs["storage_shape"]) == [2, 2, 3, 3, 16]
        out = f["mul/0/output/0"]
        np.testing.assert_allclose(out[()], x.numpy() * 3, rtol=1e-6)
        assert out.attrs["npu_format"] == "NC1HWC0"
        stats = g["mul/0/input/0"].attrs   # statistics of the logical values: no padding zeros in them
        assert stats["min"] == pytest.approx(float(x.min())) and stats["mean"] == pytest.approx(float(x.mean()),
                                                                                                 abs=1e-6)
        assert stats["npu_format"] == "NC1HWC0"
    # Replay: the live input differs, the op gets the recorded values in the live input's format.
    b = torch_npu.npu_format_cast(torch.zeros(2, 20, 3, 3).npu(), torch_npu.Format.NC1HWC0)
    with torch.utils.dumper(load_file_path=str(tmp_path / "d.h5"), use_dump=True,
                            dump_path=str(tmp_path / "r.h5")):
        z = b.mul(3)
    torch.testing.assert_close(z.cpu(), x * 3)
    assert torch_npu.get_npu_format(z) == torch_npu.Format.NC1HWC0

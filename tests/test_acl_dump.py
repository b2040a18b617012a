"""ACL-style dump of named device ops (init_dump / set_dump / finalize_dump, ACL_DUMP_DATA=1,
load_with_acl_dump) and its reader, python -m torch_npu.tools.dump_parse."""

import json
import os

import h5py
import numpy as np
import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.tools.dump_parse import DumpParseError, convert, read_dump


def _config(tmp_path, **dump):
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"dump": dict({"dump_list": [], "dump_path": str(tmp_path / "out"),
                                              "dump_mode": "all", "dump_op_switch": "on"}, **dump)}))
    return str(path)


def _files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)


def test_seed_example_add(tmp_path):
    """The seed's single-op dump: a.add_(1) between init_dump / set_dump and finalize_dump. A Python
    scalar operand makes it the tensor-scalar op Adds (aclnnAdds), as on a device."""
    a = torch.tensor([2.0, 2.0]).to("npu:0")
    torch.npu.init_dump()
    torch.npu.set_dump(_config(tmp_path))
    a.add_(1)
    torch.npu.finalize_dump()
    files = _files(tmp_path / "out")
    assert len(files) == 1
    # {dump_path}/{time}/{device}/{model_id}/{data_index}/{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}
    rel = os.path.relpath(files[0], tmp_path / "out").split(os.sep)
    assert len(rel) == 5 and len(rel[0]) == 14 and rel[1:4] == ["0", "0", "0"]
    op_type, op_name, task_id, stream_id, timestamp = rel[4].split(".")
    assert (op_type, op_name, task_id) == ("Adds", "Adds_0", "0") and int(stream_id) >= 0 and int(timestamp) > 0
    op = read_dump(files[0])
    assert op.header["launch"] == "aclnnAdds" and "test_acl_dump.py" in op.header["tag"]
    roles = [(t["role"], t["index"]) for t in op.tensors]
    assert roles == [("input", 0), ("output", 0)]
    np.testing.assert_array_equal(op.tensors[0]["array"], [2.0, 2.0])   # self before the in-place add
    np.testing.assert_array_equal(op.tensors[1]["array"], [3.0, 3.0])
    result = convert(str(tmp_path / "out"), str(tmp_path / "npy"))
    assert len(result.rows) == 2
    np.testing.assert_array_equal(np.load(tmp_path / "npy" / f"{rel[4]}.output.0.npy"), [3.0, 3.0])
    assert (tmp_path / "npy" / "summary.csv").read_text().count("\n") == 3


def test_dump_list_and_mode(tmp_path):
    torch.npu.init_dump()
    torch.npu.set_dump(_config(tmp_path, dump_list=[{"model_name": "m", "layer": ["Muls", "aclnnGelu"]}],
                               dump_mode="output"))
    x = torch.randn(4, 4).npu()
    y = torch.nn.functional.gelu(x * 2 + 1)
    torch.npu.finalize_dump()
    names = sorted(os.path.basename(f).split(".")[0] for f in _files(tmp_path / "out"))
    assert names == ["Gelu", "Muls"]
    for f in _files(tmp_path / "out"):
        op = read_dump(f)
        assert [t["role"] for t in op.tensors] == ["output"]
        if op.header["op_type"] == "Gelu":
            np.testing.assert_allclose(op.tensors[0]["array"], y.cpu().numpy(), rtol=1e-6)


def test_bad_configs(tmp_path):
    torch.npu.init_dump()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        torch.npu.set_dump(str(tmp_path / "missing.json"))
    seed_style = tmp_path / "seed.json"   # the seed's sample has no commas and # comments
    seed_style.write_text('{"dump": {"dump_list":[]\n "dump_path":"./out" # where\n "dump_mode":"all"}}')
    with pytest.raises(ValueError, match="not valid JSON: Expecting ',' delimiter at line 2"):
        torch.npu.set_dump(str(seed_style))
    with pytest.raises(ValueError, match="dump_mode must be one of output, input, all"):
        torch.npu.set_dump(_config(tmp_path, dump_mode="everything"))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(RuntimeError, match="cannot create dump directory"):
        torch.npu.set_dump(_config(tmp_path, dump_path=str(blocker / "sub")))
    torch.npu.finalize_dump()
    with pytest.raises(RuntimeError, match="call torch.npu.init_dump"):
        torch.npu.set_dump(_config(tmp_path))


def test_parser_rejects_broken_files(tmp_path, capsys):
    from torch_npu.tools.dump_parse.__main__ import main

    (tmp_path / "Add.Add_0.0.0.1").write_bytes(b"not a dump")
    with pytest.raises(DumpParseError, match="not a device-op dump file"):
        read_dump(str(tmp_path / "Add.Add_0.0.0.1"))
    header = json.dumps({"tensors": [{"role": "output", "index": 0, "dtype": "float32", "shape": [4],
                                      "offset": 0, "nbytes": 16}]}).encode()
    (tmp_path / "Mul.Mul_0.0.0.1").write_bytes(b"NPUDUMP1" + len(header).to_bytes(8, "little") + header + b"\0" * 8)
    with pytest.raises(DumpParseError, match="truncated"):
        read_dump(str(tmp_path / "Mul.Mul_0.0.0.1"))
    assert main(["-d", str(tmp_path), "-o", str(tmp_path / "npy")]) == 2
    assert "dump_parse: error:" in capsys.readouterr().err


def test_acl_dump_data_environment_variable(tmp_path, run_python):
    (tmp_path / "acl.json").write_text(json.dumps({"dump": {"dump_list": [], "dump_path": "dumped",
                                                            "dump_mode": "output", "dump_op_switch": "on"}}))
    run_python("import torch, torch_npu\nprint((torch.ones(3).npu() * 5).cpu())", env={"ACL_DUMP_DATA": "1"})
    files = _files(tmp_path / "dumped")
    assert [os.path.basename(f).split(".")[0] for f in files] == ["Muls"]
    np.testing.assert_array_equal(read_dump(files[0]).tensors[0]["array"], [5.0, 5.0, 5.0])


def test_load_with_acl_dump_maps_one_op_to_its_device_ops(tmp_path, monkeypatch):
    """The seed's IR-to-device-op mapping: extract one op from a dump (as h5copy does), replay it
    with load_with_acl_dump=True: only the device ops under that op are dumped."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()).npu()
    x = torch.randn(2, 4).npu()
    with torch.utils.dumper(use_dump=True, dump_path=str(tmp_path / "full.h5")):
        model(x)
    with h5py.File(tmp_path / "full.h5", "r") as src, h5py.File(tmp_path / "output.h5", "w") as dst:
        dst.attrs.update(src.attrs)
        src.copy(src["gelu/0"], dst.require_group("gelu"), name="0")
    monkeypatch.chdir(tmp_path)
    _config(tmp_path)
    with torch.utils.dumper(use_load=True, dump_path="./", load_file_path=str(tmp_path / "output.h5"),
                            load_with_acl_dump=True):
        model(x)
    files = _files(tmp_path / "out")
    assert [os.path.basename(f).split(".")[0] for f in files] == ["Gelu"]


@pytest.fixture
def internal_format():
    old = torch.npu.config.allow_internal_format
    torch.npu.config.allow_internal_format = True
    yield
    torch.npu.config.allow_internal_format = old


def test_private_format_operands_are_dumped_as_logical_values(tmp_path, internal_format):
    """Device ops that take private-format operands natively (a convolution of NC1HWC0 input and
    FRACTAL_Z weight, an mm of FRACTAL_NZ matrices) dump the logical values and name the format
    and the padded storage shape."""
    torch.manual_seed(0)
    x, k = torch.randn(2, 20, 5, 5), torch.randn(6, 20, 3, 3)   # 20 channels: 12 padding lanes
    m, w = torch.randn(20, 24), torch.randn(24, 18)
    a = torch_npu.npu_format_cast(x.npu(), torch_npu.Format.NC1HWC0)
    kw = torch_npu.npu_format_cast(k.npu(), torch_npu.Format.FRACTAL_Z)
    mn = torch_npu.npu_format_cast(m.npu(), torch_npu.Format.FRACTAL_NZ)
    wn = torch_npu.npu_format_cast(w.npu(), torch_npu.Format.FRACTAL_NZ)
    torch.npu.init_dump()
    torch.npu.set_dump(_config(tmp_path))
    torch.nn.functional.conv2d(a, kw, padding=1)
    torch.mm(mn, wn)
    torch.npu.finalize_dump()
    ops = {op.header["op_type"]: {(t["role"], t["index"]): t for t in op.tensors}
           for op in (read_dump(f) for f in _files(tmp_path / "out"))}
    conv = ops["Convolution"]
    assert conv[("input", 0)]["format"] == "NC1HWC0" and conv[("input", 0)]["storage_shape"] == [2, 2, 5, 5, 16]
    assert conv[("input", 1)]["format"] == "FRACTAL_Z" and conv[("input", 1)]["storage_shape"] == [18, 1, 16, 16]
    np.testing.assert_array_equal(conv[("input", 0)]["array"], x.numpy())
    np.testing.assert_array_equal(conv[("input", 1)]["array"], k.numpy())
    np.testing.assert_allclose(conv[("output", 0)]["array"],
                               torch.nn.functional.conv2d(x, k, padding=1).numpy(), rtol=1e-4, atol=1e-4)
    mm = ops["Mm"]
    assert mm[("input", 0)]["format"] == "FRACTAL_NZ" and mm[("input", 0)]["storage_shape"] == [2, 2, 16, 16]
    np.testing.assert_array_equal(mm[("input", 0)]["array"], m.numpy())
    np.testing.assert_array_equal(mm[("input", 1)]["array"], w.numpy())
    np.testing.assert_allclose(mm[("output", 0)]["array"], (m @ w).numpy(), rtol=1e-4, atol=1e-4)
    summary = convert(str(tmp_path / "out"), str(tmp_path / "npy")).summary()
    assert "(NC1HWC0)" in summary and "(FRACTAL_NZ)" in summary

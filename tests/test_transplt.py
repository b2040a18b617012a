"""The script converter (python -m torch_npu.tools.transplt): what it rewrites, what it reports, the files it
writes, custom rules and their errors, -s, the distributed mode and the analysis-only mode."""

import csv
import os
import subprocess
import sys
import textwrap

import pytest

from torch_npu.tools.transplt import RuleError, parse_rules
from torch_npu.tools.transplt.cli import main


def _tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))
    return root


def _convert(tmp_path, files, *args):
    src = _tree(tmp_path / "proj", files)
    assert main(["-i", str(src), "-o", str(tmp_path / "out"), "--no-progress", *args]) == 0
    suffix = "_msft_multi" if "distributed" in args else "_msft_analysis" if "-a" in args else "_msft"
    return tmp_path / "out" / f"proj{suffix}"


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


SCRIPT = '''\
    """Train on the GPU."""
    import torch as th
    import torch.nn as nn
    from torch import cuda
    from torch.cuda.amp import autocast, GradScaler  # mixed precision
    from apex import amp
    from apex.optimizers import FusedAdam

    th.backends.cudnn.benchmark = True
    device = th.device("cuda:1" if th.cuda.is_available() else "cpu")   # keep this comment
    model = nn.DataParallel(nn.Linear(2, 2)).cuda()
    x = th.ones(2, device='cuda').to(f"cuda:{0}")
    th.distributed.init_process_group(backend="nccl", init_method="env://")
    pg = th.distributed.new_group(backend=th.distributed.Backend.NCCL)
    ok = th.distributed.is_nccl_available() and x.is_cuda
    cuda.synchronize()
    th.cuda.nvtx.range_push("step")
    acts = [th.profiler.ProfilerActivity.CPU, th.profiler.ProfilerActivity.CUDA]
    with th.autograd.profiler.profile(use_cuda=True):
        pass
    opt = FusedAdam(model.parameters())
    model, opt = amp.initialize(model, opt, opt_level="O1")
    name = th.cuda.get_device_name(0)
    '''

EXPECTED = '''\
    """Train on the GPU."""
    import torch as th
    import torch_npu
    import torch.nn as nn
    from torch import npu as cuda
    from torch.npu.amp import autocast, GradScaler  # mixed precision
    from torch_npu.contrib import amp
    from torch_npu.optim import NpuFusedAdamW as FusedAdam

    th.backends.cudnn.benchmark = True
    device = th.device("npu:1" if th.npu.is_available() else "cpu")   # keep this comment
    model = nn.DataParallel(nn.Linear(2, 2)).npu()
    x = th.ones(2, device='npu').to(f"npu:{0}")
    th.distributed.init_process_group(backend="hccl", init_method="env://")
    pg = th.distributed.new_group(backend="hccl")
    ok = th.distributed.is_hccl_available() and x.is_npu
    cuda.synchronize()
    th.cuda.nvtx.range_push("step")
    acts = [th.profiler.ProfilerActivity.CPU, th.profiler.ProfilerActivity.PrivateUse1]
    with th.autograd.profiler.profile(use_device="npu"):
        pass
    opt = FusedAdam(model.parameters())
    model, opt = amp.initialize(model, opt, opt_level="O1")
    name = th.npu.get_device_name(0)
    '''


def test_rewrites_keep_formatting_and_comments(tmp_path):
    out = _convert(tmp_path, {"train.py": SCRIPT})
    assert (out / "train.py").read_text() == textwrap.dedent(EXPECTED)
    rows = _rows(out / "change_list.csv")
    assert rows[0] == ["File", "Start Line", "End Line", "Operation Type", "Message"]
    kinds = {(r[1], r[3]) for r in rows[1:]}
    assert ("10", "Device") in kinds and ("10", "API") in kinds and ("13", "Distributed") in kinds
    assert ("18", "Profiler") in kinds and ("6", "AMP") in kinds and ("3", "Import") not in kinds
    manual = {r[1]: r[4] for r in rows[1:] if r[3] == "Manual"}
    assert "DataParallel is not supported on npu" in manual["11"]
    assert "cuDNN flags have no effect" in manual["9"]
    assert "NVTX" in manual["17"]


def test_reports_what_it_cannot_rewrite(tmp_path):
    out = _convert(tmp_path, {
        "setup.py": """
            from torch.utils.cpp_extension import BuildExtension, CUDAExtension
            ext = CUDAExtension("fused", ["fused.cu"])
            """,
        "kernels/fused.cu": "__global__ void k() {}\n",
        "run.py": """
            import os
            import cupy
            import torch
            from apex.parallel import DistributedDataParallel
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            cap = torch.cuda.get_device_capability()
            g = torch.cuda.CUDAGraph()
            """})
    manual = [r for r in _rows(out / "change_list.csv")[1:] if r[3] == "Manual"]
    text = "\n".join(f"{r[0]}:{r[1]}: {r[4]}" for r in manual)
    for expected in ("setup.py:3: torch.utils.cpp_extension.CUDAExtension: CUDA extension",
                     "kernels/fused.cu:1: CUDA source file", "run.py:3: cupy: CuPy runs CUDA kernels only",
                     "run.py:5: apex.parallel", "run.py:6: CUDA_VISIBLE_DEVICES does not select npus",
                     "run.py:7: torch.cuda.get_device_capability", "run.py:8: torch.cuda.CUDAGraph"):
        assert expected in text, text
    assert (out / "kernels" / "fused.cu").read_text() == "__global__ void k() {}\n"  # copied


def test_unsupported_ops_report_and_log(tmp_path):
    from openpyxl import load_workbook

    out = _convert(tmp_path, {"model.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        def forward(x, idx, src):
            y = F.grid_sample(x, x)         # no device op: reported
            z = x.index_add(0, idx, src)    # no device op: reported
            w = torch.relu(x) + torch.matmul(x, x)   # device ops: not reported
            return nn.Conv2d(3, 3, 1)(y), z, w
        """})
    rows = _rows(out / "unsupported_op.csv")
    assert rows[0] == ["File", "Line", "API", "ATen Op", "Verdict", "Suggestion"]
    found = {(r[1], r[2], r[3]) for r in rows[1:]}
    assert ("7", "F.grid_sample", "aten::grid_sampler_2d") in found and ("8", "x.index_add", "aten::index_add") in found
    assert not any(r[1] in ("9", "10") for r in rows[1:])
    assert all("generic executor" in r[4] for r in rows[1:])
    sheet = load_workbook(out / "unsupported_op.xlsx").active
    assert [c.value for c in sheet[1]] == rows[0]
    assert [[str(c.value) for c in row] for row in sheet.iter_rows(min_row=2)] == rows[1:]
    log = (out / "msFmkTranspltlog.txt").read_text()
    assert "model.py: " in log and f"{len(rows) - 1} calls a real NPU would not run" in log


def test_unparsable_file_is_copied_unchanged_and_reruns_replace_output(tmp_path, capsys):
    bad = b"def broken(:\n    pass\r\n\xff\n"
    out = _convert(tmp_path, {"bad.py": b"def broken(:\n    pass\n", "latin.py": bad, "ok.py": "x = 'cuda'\n"})
    assert (out / "bad.py").read_bytes() == b"def broken(:\n    pass\n"
    assert (out / "latin.py").read_bytes() == bad
    rows = {r[0]: r for r in _rows(out / "change_list.csv")[1:] if r[3] == "Unparsable"}
    assert "syntax error at line" in rows["bad.py"][4] and "not UTF-8" in rows["latin.py"][4]
    assert "copied unchanged" in capsys.readouterr().out
    assert "[ERROR] bad.py: cannot be parsed" in (out / "msFmkTranspltlog.txt").read_text()
    # A second run replaces the previous output; a foreign directory is never removed.
    (tmp_path / "proj" / "ok.py").write_text("x = 'cuda:1'\n")
    assert main(["-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"), "--no-progress"]) == 0
    assert (out / "ok.py").read_text() == "x = 'npu:1'\n"
    (tmp_path / "out2" / "proj_msft").mkdir(parents=True)
    assert main(["-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out2"), "--no-progress"]) == 2
    assert "is not a converter output" in capsys.readouterr().err


def test_analysis_only_writes_no_code(tmp_path):
    out = _convert(tmp_path, {"train.py": SCRIPT}, "-a")
    assert not (out / "train.py").exists()
    cuda = _rows(out / "cuda_op_list.csv")
    assert cuda[0] == ["File", "Line", "Operation Type", "CUDA API and its npu counterpart"]
    assert ["train.py", "16", "API", "from torch import cuda -> from torch import npu as cuda"] not in cuda
    assert any(r[3] == "torch.cuda.get_device_name -> torch.npu.get_device_name" for r in cuda)
    unsupported = _rows(out / "unsupported_api.csv")
    assert any("DataParallel" in r[3] for r in unsupported[1:])
    assert (out / "unsupported_op.xlsx").exists()


def test_specify_device_uses_device_id(tmp_path):
    out = _convert(tmp_path, {"train.py": """
        import torch

        def main(gpu):
            torch.cuda.set_device(gpu)
            return torch.zeros(1).cuda(gpu).to("cuda:1"), torch.device("cuda", 1)
        """}, "-s")
    text = (out / "train.py").read_text()
    assert text.lstrip().startswith("import os\nimport torch\nimport torch_npu\n\n"
                           "torch.npu.set_device(int(os.environ.get(\"DEVICE_ID\", \"0\")))")
    assert 'torch.npu.set_device(int(os.environ.get("DEVICE_ID", "0")))\n    return' in text
    assert 'torch.zeros(1).npu().to("npu"), torch.device("npu")' in text


def test_distributed_mode(tmp_path, capsys):
    src = {"main.py": """
        import torch
        import torch.nn as nn

        def main():
            data = list(range(8))
            net = nn.Linear(4, 2)
            criterion = nn.MSELoss()
            net = net.cuda()
            optimizer = torch.optim.SGD(net.parameters(), 0.1)
            loader = torch.utils.data.DataLoader(data, batch_size=2, shuffle=True)
            return net, optimizer, loader
        """}
    out = _convert(tmp_path, src, "distributed", "-m", "main.py", "-t", "net")
    text = (out / "main.py").read_text()
    assert 'torch.distributed.init_process_group(backend="hccl")' in text
    assert ("net = net.npu()\n    if torch.distributed.is_initialized():\n        net = torch.nn.parallel."
            "DistributedDataParallel(net, device_ids=[MSFT_LOCAL_RANK])\n    optimizer") in text
    assert "sampler=torch.utils.data.DistributedSampler(data, shuffle=True) if torch.distributed" in text
    compile(text, "main.py", "exec")
    launcher = out / "run_distributed_npu.sh"
    assert os.access(launcher, os.X_OK) and "torch.distributed.run" in launcher.read_text()
    assert "--nproc_per_node" in launcher.read_text() and "main.py" in launcher.read_text()
    manual = [r[4] for r in _rows(out / "change_list.csv")[1:] if r[3] == "Manual"]
    assert any("set_epoch" in m for m in manual) and any("net.module" in m for m in manual)
    # A missing model variable is reported, a missing entry file is an error.
    out = _convert(tmp_path, src, "distributed", "-m", "main.py", "-t", "model")
    assert any("-t model: no assignment" in r[4] for r in _rows(out / "change_list.csv")[1:])
    assert main(["-i", str(tmp_path / "proj"), "-o", str(tmp_path / "o"), "distributed", "-m", "nope.py"]) == 2
    assert "distributed -m nope.py: not a file of the input" in capsys.readouterr().err


@pytest.mark.parametrize("doc,message", [
    ({"rule": {}}, 'expected {"rules"'),
    ({"rules": {"ArgModifyRule": []}}, "unknown rule kind 'ArgModifyRule'"),
    ({"rules": {"ArgsModifyRule": {}}}, "ArgsModifyRule must be a list"),
    ({"rules": {"ArgsModifyRule": [{"func_name": "f", "arg_idx": 0}]}}, "ArgsModifyRule[0]: missing 'arg_new'"),
    ({"rules": {"ArgsModifyRule": [{"func_name": "f", "arg_idx": "0", "arg_new": "1"}]}},
     "ArgsModifyRule[0]: 'arg_idx' must be a non-negative integer, got \"0\""),
    ({"rules": {"ArgsModifyRule": [{"func_name": "f", "arg_idx": 0, "arg_new": "1 +"}]}},
     "ArgsModifyRule[0]: 'arg_new' is not a Python expression"),
    ({"rules": {"FuncNameModifyRule": [{"old_name": "f", "new_name": "g"}, {"old_name": "f", "new_name": "1g"}]}},
     "FuncNameModifyRule[1]: 'new_name' must be a (dotted) Python name"),
    ({"rules": {"ModuleNameModifyRule": [{"old_name": "a.b", "new_name": "c", "parent_module": ""}]}},
     "ModuleNameModifyRule[0]: 'old_name' and 'new_name' are one module name each"),
    ({"rules": {"ModuleNameModifyRule": [{"old_name": "a", "new_name": "c", "parent": "x"}]}},
     "ModuleNameModifyRule[0]: missing 'parent_module'"),
])
def test_malformed_rules_name_the_entry(doc, message):
    with pytest.raises(RuleError) as e:
        parse_rules(doc, "rules.json")
    assert message in str(e.value) and str(e.value).startswith("rules.json")


def test_rules_file_errors_from_the_cli(tmp_path, capsys):
    (tmp_path / "proj").mkdir()
    bad = tmp_path / "rules.json"
    bad.write_text('{"rules": {"FuncNameModifyRule": [{"old_name": 1, "new_name": "g"}]}}')
    assert main(["-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"), "-r", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "FuncNameModifyRule[0]: 'old_name' must be a string, got 1" in err
    assert not (tmp_path / "out").exists()
    bad.write_text("{not json")
    assert main(["-i", str(tmp_path / "proj"), "-o", str(tmp_path / "out"), "-r", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_custom_rules(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text("""{"rules": {
        "ArgsModifyRule": [{"func_name": "torch.optim.SGD", "arg_idx": 1, "arg_new": "0.01"},
                           {"func_name": "run", "arg_idx": 3, "arg_new": "None"}],
        "FuncNameModifyRule": [{"old_name": "gpu_sync", "new_name": "npu_sync"}],
        "ModuleNameModifyRule": [{"old_name": "amp", "new_name": "amp_npu", "parent_module": "mylib"},
                                 {"old_name": "cudakit", "new_name": "npukit", "parent_module": ""}]}}""")
    out = _convert(tmp_path, {"t.py": """
        import torch
        import cudakit
        import mylib.amp
        from mylib import amp
        from tools import gpu_sync
        opt = torch.optim.SGD([], 0.1, momentum=0.9)
        gpu_sync()
        mylib.amp.scale(cudakit.run(1, 2))
        """}, "-r", str(rules))
    assert (out / "t.py").read_text() == textwrap.dedent("""
        import torch
        import npukit as cudakit
        import mylib.amp_npu
        from mylib import amp_npu as amp
        from tools import npu_sync
        opt = torch.optim.SGD([], 0.01, momentum=0.9)
        npu_sync()
        mylib.amp_npu.scale(cudakit.run(1, 2))
        """)
    rows = _rows(out / "change_list.csv")[1:]
    assert sum(r[3] == "Custom Rule" for r in rows) == 7
    assert any(r[3] == "Manual" and "no positional argument 3" in r[4] for r in rows)


def test_progress_bar_and_console_scripts(tmp_path, capsys):
    _tree(tmp_path / "p", {"a.py": "x = 1\n", "b.py": "y = 'cuda'\n"})
    assert main(["-i", str(tmp_path / "p"), "-o", str(tmp_path / "o")]) == 0
    assert "transplt" in capsys.readouterr().err  # tqdm's bar
    bindir = os.path.dirname(sys.executable)
    for name in ("ms_fmk_transplt", "torch_npu_transplt"):
        proc = subprocess.run([os.path.join(bindir, name), "-h"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "distributed" in proc.stdout and "-r RULE" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "torch_npu.tools.transplt", "-i", str(tmp_path / "p" / "b.py"), "-o",
                           str(tmp_path / "o3"), "--no-progress"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o3" / "b_msft" / "b.py").read_text() == "y = 'npu'\n"

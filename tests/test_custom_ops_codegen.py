"""The op code generator: yaml mistakes and missing adapters fail with a message naming the entry and file."""

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(REPO, "codegen", "gen.py")


@pytest.fixture
def tree(tmp_path):
    """A copy of the yaml files and adapter sources the generator reads."""
    shutil.copytree(os.path.join(REPO, "config"), tmp_path / "config")
    for sub in ("aten", "custom"):
        shutil.copytree(os.path.join(REPO, "csrc", sub), tmp_path / "csrc" / sub)
    return tmp_path


def run_gen(root):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    return subprocess.run([sys.executable, GEN, "--source-root", str(root), "--out-dir", str(root / "out")],
                          capture_output=True, text=True, env=env, timeout=120)


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_generates_everything(tree):
    r = run_gen(tree)
    assert r.returncode == 0, r.stderr
    reg = (tree / "out" / "RegisterNpuGenerated.cpp").read_text()
    assert 'm.impl("add.out", TORCH_FN(add_out));' in reg
    assert 'm.impl("cat.out", TORCH_FN(cat_out));' in reg
    assert 'm.def("npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)");' in reg
    assert 'm.impl("npu_nms_v4", TORCH_FN(npu_nms_v4_meta));' in reg
    autograd = (tree / "out" / "NpuAutogradGenerated.cpp").read_text()
    assert "TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m)" in autograd and "NpuRmsNormFunction" in autograd
    decls = (tree / "out" / "csrc" / "aten" / "NpuNativeFunctions.h").read_text()
    assert "npu_rms_norm" not in decls
    assert "npu_rms_norm(" in (tree / "out" / "csrc" / "custom" / "NpuCustomFunctions.h").read_text()
    assert "at::Tensor & add_out(const at::Tensor & self, const at::Tensor & other, const at::Scalar & alpha, " \
           "at::Tensor & out);" in decls
    # Structured groups take tensor lists as the dispatcher does (ITensorListRef), others as TensorList.
    assert "at::Tensor & cat_out(const at::ITensorListRef & tensors, int64_t dim, at::Tensor & out);" in decls
    # Mutable tensors declared const where native_functions.yaml says so (resize_).
    assert "const at::Tensor & resize_(const at::Tensor & self" in decls
    py = (tree / "out" / "_op_bindings.py").read_text()
    assert "def npu_rms_norm(self, gamma, epsilon=1e-06):" in py


def test_generic_route(tree):
    # `generic: true` sends an op (e.g. one whose default kernel only throws) to the generic executor.
    edit(tree / "config" / "npu_native_functions.yaml", "  - zero_\n", "  - zero_\n  - {func: flip, generic: true}\n")
    r = run_gen(tree)
    assert r.returncode == 0, r.stderr
    assert 'm.impl("flip", genericExecutor());' in (tree / "out" / "RegisterNpuGenerated.cpp").read_text()


def test_unknown_aten_op(tree):
    cfg = tree / "config" / "npu_native_functions.yaml"
    edit(cfg, "  - zero_\n", "  - zeroo_\n")
    r = run_gen(tree)
    assert r.returncode == 1
    assert "npu_native_functions.yaml:" in r.stderr and "'zeroo_'" in r.stderr and "no such ATen op" in r.stderr


def test_missing_adapter_names_entry_and_file(tree):
    cfg = tree / "config" / "npu_native_functions.yaml"
    edit(cfg, "custom:\n", "custom:\n  - func: npu_silly(Tensor self) -> Tensor\n")
    r = run_gen(tree)
    assert r.returncode == 1
    assert "custom entry 'npu_silly'" in r.stderr and "csrc/custom/SillyKernelNpu.cpp" in r.stderr
    assert "at::Tensor npu_silly(const at::Tensor & self)" in r.stderr


def test_missing_aten_adapter(tree):
    cfg = tree / "config" / "npu_native_functions.yaml"
    edit(cfg, "  - zero_\n", "  - zero_\n  - cos.out\n")
    r = run_gen(tree)
    assert r.returncode == 1 and "supported entry 'cos.out'" in r.stderr and "cos_out" in r.stderr


def test_malformed_schema_and_keys(tree):
    cfg = tree / "config" / "npu_native_functions.yaml"
    edit(cfg, "  - func: npu_iou(Tensor bboxes, Tensor gtboxes, int mode=0) -> Tensor",
         "  - func: npu_iou(Tensor bboxes, Tensr gtboxes) -> Tensor")
    r = run_gen(tree)
    assert r.returncode == 1 and "custom entry" in r.stderr and "malformed schema" in r.stderr
    line = next(i for i, l in enumerate(cfg.read_text().splitlines(), 1) if "Tensr" in l)
    assert f"npu_native_functions.yaml:{line}:" in r.stderr


def test_derivative_for_unknown_argument(tree):
    d = tree / "config" / "derivatives.yaml"
    edit(d, "  self: npu_swiglu_backward(grad, self, dim)", "  selff: npu_swiglu_backward(grad, self, dim)")
    r = run_gen(tree)
    assert r.returncode == 1 and "derivatives.yaml:" in r.stderr and "'selff' is not an argument" in r.stderr


def test_supported_ops_doc_is_current(tmp_path):
    """docs/supported_ops.md is what `make supported-ops` writes for the installed build (run it after adding ops)."""
    out = tmp_path / "supported_ops.md"
    r = subprocess.run([sys.executable, os.path.join(REPO, "codegen", "supported_ops.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=os.path.dirname(os.path.abspath(__file__)))
    assert r.returncode == 0, r.stderr
    with open(os.path.join(REPO, "docs", "supported_ops.md"), encoding="utf-8") as f:
        assert f.read() == out.read_text(), "docs/supported_ops.md is stale: run `make supported-ops`"
    assert "| `npu_gelu` |" in out.read_text()


def test_listed_device_ops_exist():
    """Every opslib op a custom entry lists under device_ops is registered in the installed build."""
    sys.path.insert(0, os.path.join(REPO, "codegen"))
    from model import load_config
    from torch_npu import _C
    cfg = load_config(os.path.join(REPO, "config", "npu_native_functions.yaml"))
    listed = {d for c in cfg.custom for d in c.device_ops}
    assert "aclnnFlashAttentionScore" in listed
    assert listed <= set(_C._device_ops()), sorted(listed - set(_C._device_ops()))

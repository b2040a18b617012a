"""C++ extensions calling custom op packages through EXEC_NPU_CMD (route 2): the SDK headers and
torch_npu.utils.cpp_extension, the example op package built with CMake into Ascend's vendors/ layout,
seed 002's add_custom extension end to end, package priority, overrides, broken packages and missing
ops. The op registry reads ASCEND_CUSTOM_OPP_PATH once per process, so each scenario runs in a child.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import torch_npu
import torch_npu.utils.cpp_extension as npu_ext

import extension_builds

EXTENSION_DIR = os.path.join(extension_builds.EXAMPLES, "custom_op_package", "extension")


@pytest.fixture(scope="session")
def opp_root():
    return extension_builds.add_custom_package()


@pytest.fixture(scope="session")
def custom_ops_dir():
    return extension_builds.add_custom_extension()


@pytest.fixture(scope="session")
def layered_root():
    return extension_builds.layered_opp_root()


def run_child(code_or_args, custom_ops_dir, opp_path=None, check=True):
    """Runs Python code (or a script with arguments) with custom_ops importable and the given
    ASCEND_CUSTOM_OPP_PATH (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_CUSTOM_OPP_PATH", "NPU_SIM_FALLBACK")}
    env["PYTHONPATH"] = custom_ops_dir
    env["ASCEND_GLOBAL_LOG_LEVEL"] = "2"  # package warnings on
    if opp_path is not None:
        env["ASCEND_CUSTOM_OPP_PATH"] = opp_path
    args = code_or_args if isinstance(code_or_args, list) else ["-c", textwrap.dedent(code_or_args)]
    proc = subprocess.run([sys.executable, *args], env=env, cwd=custom_ops_dir, capture_output=True, text=True,
                          timeout=300)
    if check:
        assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def test_sdk_headers_and_paths_are_installed():
    include = npu_ext.include_paths()[0]
    for header in ("torch_npu/csrc/framework/utils/OpAdapter.h", "torch_npu/csrc/framework/OpCommand.h",
                   "torch_npu/csrc/core/npu/NPUStream.h", "npu/opslib.h", "aclnn/aclnn_base.h",
                   "npu/kernel_launch.h"):
        assert os.path.isfile(os.path.join(include, header)), header
    lib = npu_ext.library_paths()[0]
    assert {"libtorch_npu.so", "libnpu_opslib.so", "libnpu_runtime.so"} <= set(os.listdir(lib))
    ext = npu_ext.NpuExtension("demo", [os.path.join(EXTENSION_DIR, "csrc", "add_custom.cpp")])
    assert include in ext.include_dirs and "torch_npu" in ext.libraries and lib in ext.runtime_library_dirs


def test_a_header_outside_the_sdk_fails_before_compiling(tmp_path):
    helper = tmp_path / "helper.h"
    helper.write_text('#pragma once\n#include "torch_npu/csrc/framework/utils/CalcuOpUtil.h"\n')
    source = tmp_path / "op.cpp"
    source.write_text('#include <torch/library.h>\n#include "helper.h"\n')
    with pytest.raises(RuntimeError) as err:
        npu_ext.load(name="bad_header_ext", sources=[str(source)], build_directory=str(tmp_path))
    message = str(err.value)
    assert f'{helper}:2: #include "torch_npu/csrc/framework/utils/CalcuOpUtil.h"' in message
    assert "torch_npu/csrc/framework/utils/OpAdapter.h" in message  # what the SDK does have
    with pytest.raises(RuntimeError, match=r"<cpp_sources\[0\]>:1: #include \"torch_npu/csrc/aten/NPUNativeFunctions.h\""):
        npu_ext.load_inline(name="bad_inline", cpp_sources='#include "torch_npu/csrc/aten/NPUNativeFunctions.h"\n')
    with pytest.raises(RuntimeError, match="CalcuOpUtil.h"):
        npu_ext.NpuExtension("bad", [str(source)])


def test_missing_sdk_headers_are_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(npu_ext, "include_paths", lambda: [str(tmp_path)])
    with pytest.raises(RuntimeError, match=r"torch_npu's C\+\+ headers are missing: .*OpAdapter.h does not exist"):
        npu_ext.load_inline(name="no_sdk", cpp_sources="")


def test_op_package_layout(opp_root):
    vendor = os.path.join(opp_root, "vendors", "customize", "op_api")
    assert os.path.isfile(os.path.join(vendor, "lib", "libcust_opapi.so"))
    assert os.path.isfile(os.path.join(vendor, "include", "aclnn_add_custom.h"))
    with open(os.path.join(opp_root, "vendors", "config.ini")) as f:
        assert f.read().strip() == "load_priority=customize"


def test_seed_add_custom_test_passes(opp_root, custom_ops_dir):
    """Seed 002's route-2 test, as a script (unittest), against the package found through the env."""
    proc = run_child([os.path.join(EXTENSION_DIR, "test", "test_add_custom.py"), "-v"], custom_ops_dir, opp_root)
    assert "Ran 1 test" in proc.stderr and proc.stderr.rstrip().endswith("OK"), proc.stderr


def test_add_custom_eager_compile_errors_and_export(opp_root, custom_ops_dir):
    run_child(
        """
        import onnxruntime as ort, torch, torch_npu, custom_ops
        x = torch.randn(4, 33); y = torch.randn(4, 33)
        xn, yn = x.npu(), y.npu()
        torch.testing.assert_close(custom_ops.add_custom(xn, yn).cpu(), x + y)
        i = torch.randint(-100, 100, (5,), dtype=torch.int32)
        torch.testing.assert_close(torch.ops.myops.add_custom(i.npu(), i.npu()).cpu(), i + i)
        assert torch.npu.op_stats()["aclnnAddCustom"]["device_op"] == 2
        # A private-format operand reaches the extension's EXEC_NPU_CMD through TransData.
        xz = torch_npu.npu_format_cast(xn, 29)
        torch.testing.assert_close(custom_ops.add_custom(xz, yn).cpu(), x + y)
        # The cast and the stand-in (a package that marks no outputs also gets its stand-ins copied back).
        assert torch.npu.op_stats()["aclnnTransData"]["device_op"] >= 2
        assert torch_npu.get_npu_format(xz) == 29 and torch.equal(xz.cpu(), x)

        # torch.compile: the Meta kernels give the shapes; forward and backward.
        xg = xn.clone().requires_grad_(); yg = yn.clone().requires_grad_()
        f = torch.compile(lambda a, b: torch.ops.myops.add_custom(a, b) * 2, backend="aot_eager", fullgraph=True)
        out = f(xg, yg)
        out.sum().backward()
        torch.testing.assert_close(out.cpu(), (x + y) * 2)
        torch.testing.assert_close(xg.grad.cpu(), torch.full_like(x, 2.0))

        # The package's own checks come back as errors naming the op.
        yt = torch.randn(33, 4).npu()
        for a, b, message in ((xn.t(), yt, "x must be contiguous"), (xn.double(), yn, "same dtype")):
            try:
                custom_ops.add_custom(a, b)
            except RuntimeError as e:
                assert "aclnnAddCustom" in str(e) and message in str(e), str(e)
            else:
                raise AssertionError("no error for " + message)

        # ONNX, dynamo exporter: the extension op with a translation to standard Add; onnxruntime = npu eager.
        from onnxscript import opset18 as op
        class M(torch.nn.Module):
            def forward(self, a, b):
                return torch.ops.myops.add_custom(a, b) * 3
        prog = torch.onnx.export(M(), (xn, yn), dynamo=True,
                                 custom_translation_table={torch.ops.myops.add_custom.default: lambda a, b: op.Add(a, b)})
        sess = ort.InferenceSession(prog.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), (x, y))})[0]
        torch.testing.assert_close(torch.from_numpy(got), M()(xn, yn).cpu())

        # ONNX, TorchScript exporter: a C++-extension op with a registered symbolic (seed 000, way 2).
        import io, onnx
        torch.onnx.register_custom_op_symbolic("myops::add_custom", lambda g, a, b: g.op("Add", a, b), 9)
        buffer = io.BytesIO()
        torch.onnx.export(M(), (xn, yn), buffer, dynamo=False, opset_version=11)
        model = onnx.load_from_string(buffer.getvalue())
        assert [n.op_type for n in model.graph.node].count("Add") == 1
        sess = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), (x, y))})[0]
        torch.testing.assert_close(torch.from_numpy(got), (x + y) * 3)
        print("all ok")
        """,
        custom_ops_dir,
        opp_root,
    )


def test_vendor_priority_override_and_broken_package(layered_root, custom_ops_dir):
    proc = run_child(
        """
        import torch, torch_npu, custom_ops
        a = torch.randn(6); b = torch.randn(6)
        # "override" replaces the built-in aclnnMul; "customize" still provides aclnnAddCustom.
        torch.testing.assert_close((a.npu() * b.npu()).cpu(), a * b + 1000)
        torch.testing.assert_close(custom_ops.add_custom(a.npu(), b.npu()).cpu(), a + b)
        print("all ok")
        """,
        custom_ops_dir,
        layered_root,
    )
    broken = os.path.join(layered_root, "vendors", "broken", "op_api", "lib", "libcust_opapi.so")
    assert f"[WARNING] NPU_OPSLIB(" in proc.stderr
    assert f"skipped custom op package {broken}: {broken}: file too short" in proc.stderr, proc.stderr


def test_missing_aclnn_symbol_names_the_symbols_and_paths(layered_root, custom_ops_dir):
    code = """
        import torch, torch_npu, custom_ops
        try:
            custom_ops.add_custom(torch.ones(2).npu(), torch.ones(2).npu())
        except RuntimeError as e:
            print(e)
        else:
            raise AssertionError("no error")
        """
    proc = run_child(code, custom_ops_dir, None)
    assert ("device op aclnnAddCustom is not available: aclnnAddCustom is not a built-in op and no custom op "
            "package provides it: looked for the symbols aclnnAddCustomGetWorkspaceSize and aclnnAddCustom in no "
            "custom op package: ASCEND_CUSTOM_OPP_PATH is not set") in proc.stdout, proc.stdout
    override_only = os.path.join(layered_root, "vendors", "override")
    proc = run_child(code, custom_ops_dir, override_only)
    library = os.path.join(override_only, "op_api", "lib", "libcust_opapi.so")
    assert (f"looked for the symbols aclnnAddCustomGetWorkspaceSize and aclnnAddCustom in the custom op packages "
            f"{library} (ASCEND_CUSTOM_OPP_PATH={override_only})") in proc.stdout, proc.stdout

"""Graph mode's torchair API: get_npu_backend / CompilerConfig, converters mapping ops to named device
ops (the custom-op sample flow with its op package), Meta registrations, and every npu_* op compiled
with fullgraph=True. Results are checked against eager npu or CPU references."""

import glob
import os
import subprocess
import sys
from typing import Any

import pytest
import torch
import torch._inductor.config

import torch_npu
import torchair
from torchair import ge
from torchair.configs.compiler_config import CompilerConfig
from test_custom_ops_compile import CASES

NPU = "npu"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, scope="module")
def _compile_in_process():
    # Graphs here are small: compiling their few kernels in-process beats starting Inductor's worker pool.
    with torch._inductor.config.patch(compile_threads=1):
        yield

# Test ops, defined once per process: eager kernels written with ATen ops (they run on npu).
_lib = torch.library.Library("graph_test", "DEF")
_lib.define("scale_mul(Tensor x, Tensor y) -> Tensor")
_lib.define("row_softmax(Tensor x) -> Tensor")
_lib.define("pair(Tensor x) -> (Tensor, Tensor)")
_lib.define("lookup(Tensor weight, Tensor indices) -> Tensor")
_eager_calls = {"scale_mul": 0}


@torch.library.impl(_lib, "scale_mul", "CompositeExplicitAutograd")
def _scale_mul(x, y):
    if x.device.type == NPU:  # (not the shape computations on meta / fake tensors)
        _eager_calls["scale_mul"] += 1
    return x * y


@torch.library.impl(_lib, "row_softmax", "CompositeExplicitAutograd")
def _row_softmax(x):
    return x.softmax(-1)


@torch.library.impl(_lib, "pair", "CompositeExplicitAutograd")
def _pair(x):
    return x + 1, x * 2


@torch.library.impl(_lib, "lookup", "CompositeExplicitAutograd")
def _lookup(weight, indices):
    return torch.nn.functional.embedding(indices, weight)


@torchair.register_fx_node_ge_converter(torch.ops.graph_test.lookup.default)
def _convert_lookup(weight: ge.Tensor, indices: ge.Tensor, meta_outputs: Any = None):
    return ge.custom_op("Embedding", inputs={"weight": weight, "indices": indices}, outputs=["out"])


@torchair.register_fx_node_ge_converter(torch.ops.graph_test.scale_mul.default)
def _convert_scale_mul(x: ge.Tensor, y: ge.Tensor, meta_outputs: Any = None):
    return ge.custom_op("Mul", inputs={"self": x, "other": y}, outputs=["out"])


@torchair.register_fx_node_ge_converter(torch.ops.graph_test.row_softmax.default)
def _convert_row_softmax(x: ge.Tensor, meta_outputs: Any = None):
    return ge.custom_op("Softmax", inputs={"self": x}, attrs={"dim": ge.attr.Int(-1)}, outputs=["out"])


def backend(**settings):
    config = CompilerConfig()
    for key, value in settings.items():
        target = config
        *path, leaf = key.split(".")
        for part in path:
            target = getattr(target, part)
        setattr(target, leaf, value)
    return torchair.get_npu_backend(compiler_config=config)


def test_converted_op_runs_as_the_named_device_op():
    x, y = torch.randn(6, 5), torch.randn(6, 5)
    fn = torch.compile(lambda a, b: torch.ops.graph_test.scale_mul(a + 1, b).relu(), backend=backend(),
                       fullgraph=True)
    xn, yn = x.to(NPU), y.to(NPU)
    fn(xn, yn)  # compile
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    calls = _eager_calls["scale_mul"]
    out = fn(xn, yn)
    torch.testing.assert_close(out.cpu(), ((x + 1) * y).relu())
    assert torch.npu.op_stats()["aclnnMul"]["device_op"] == 1
    assert _eager_calls["scale_mul"] == calls  # not the eager kernel


def test_converter_attributes_reach_the_device_op():
    x = torch.randn(4, 7)
    fn = torch.compile(lambda a: torch.ops.graph_test.row_softmax(a * 3), backend=backend())
    torch.testing.assert_close(fn(x.to(NPU)).cpu(), (x * 3).softmax(-1))


def test_device_op_failing_inside_a_graph_names_the_graph_at_the_next_sync():
    def gather_rows(w, i):
        return torch.ops.graph_test.lookup(w, i) * 2

    fn = torch.compile(gather_rows, backend=backend())
    w = torch.randn(10, 4)
    torch.testing.assert_close(fn(w.to(NPU), torch.tensor([1, 2], device=NPU)).cpu(), w[[1, 2]] * 2)
    fn(w.to(NPU), torch.tensor([1, 12], device=NPU))  # queued; the device op fails on the stream
    with pytest.raises(RuntimeError) as info:
        torch.npu.synchronize()
    msg = str(info.value)
    assert "aclnnEmbedding failed" in msg and "index out of range" in msg, msg
    assert "in compiled graph" in msg and "gather_rows()" in msg and "test_graph_torchair.py:" in msg, msg


def test_unknown_device_op_type_fails_at_compile_time_naming_the_op():
    lib = torch.library.Library("graph_test_bad", "DEF")
    lib.define("noop(Tensor x) -> Tensor")
    torch.library.impl(lib, "noop", "CompositeExplicitAutograd")(lambda x: x.clone())

    @torchair.register_fx_node_ge_converter(torch.ops.graph_test_bad.noop.default)
    def convert(x, meta_outputs=None):
        return ge.custom_op("NoSuchKernel", inputs={"x": x}, outputs=["y"])

    fn = torch.compile(lambda a: torch.ops.graph_test_bad.noop(a) + 1, backend=backend())
    with pytest.raises(Exception, match=r"graph_test_bad.noop.*NoSuchKernel.*aclnnNoSuchKernel"):
        fn(torch.randn(3, device=NPU))


def test_converter_with_the_wrong_arity_fails_at_compile_time_naming_the_op():
    @torchair.register_fx_node_ge_converter(torch.ops.graph_test.pair.default)
    def convert(x, meta_outputs=None):
        return ge.custom_op("Abs", inputs={"self": x}, outputs=["out"])

    fn = torch.compile(lambda a: torch.ops.graph_test.pair(a)[0] * 2, backend=backend())
    with pytest.raises(Exception, match=r"graph_test.pair.*returned 1 output.*has 2"):
        fn(torch.randn(3, device=NPU))


def test_custom_op_outside_a_converter_is_an_error():
    with pytest.raises(RuntimeError, match="converters"):
        ge.custom_op("Add", inputs={}, outputs=["z"])


def test_compiler_config_validates_and_dumps_graphs(tmp_path):
    config = CompilerConfig()
    with pytest.raises(ValueError, match="max-autotune"):
        config.mode = "fastest"
    with pytest.raises(AttributeError, match="no setting"):
        config.debug.graph_dump.kind = "py"
    fn = torch.compile(lambda a: (a * 2).sum(), backend=backend(**{"debug.graph_dump.type": "py",
                                                                    "debug.graph_dump.path": str(tmp_path),
                                                                    "mode": "reduce-overhead"}))
    x = torch.randn(5)
    torch.testing.assert_close(fn(x.to(NPU)).cpu(), (x * 2).sum())
    dumps = glob.glob(str(tmp_path / "dynamo_graph_*.py"))
    assert len(dumps) == 1 and "mul" in open(dumps[0]).read()


def test_compile_mode_and_internal_format_switches():
    torch.npu.set_compile_mode(jit_compile=False)
    assert torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=True)
    assert not torch.npu.is_jit_compile_false()
    torch.npu.set_compile_mode(jit_compile=False)
    with pytest.raises(TypeError):
        torch.npu.set_compile_mode(jit_compile="no")
    torch.npu.config.allow_internal_format = False
    assert torch.npu.config.allow_internal_format is False


def test_backend_name_is_registered():
    assert "npu" in torch._dynamo.list_backends()


# The npu_* ops not in the eager-backend cases (float-status ops hold device state; their results are
# compared as values all the same).
GRAPH_CASES = {
    **CASES,
    "gelu": (lambda x: torch_npu.npu_gelu(x, approximate="tanh") * 2, lambda: (torch.randn(3, 8),)),
    "mish": (lambda x: torch_npu.npu_mish(x) + 1, lambda: (torch.randn(3, 8),)),
    "transpose": (lambda x: torch_npu.npu_transpose(x, (2, 0, 1)) + 1, lambda: (torch.randn(2, 3, 4),)),
    "slice": (lambda x: torch_npu.npu_slice(x, [1, 2], [2, 3]) * 2, lambda: (torch.randn(4, 6),)),
    "pad": (lambda x: torch_npu.npu_pad(x, [1, 1, 2, 0]) - 1, lambda: (torch.randn(3, 4),)),
    "bmmV2": (lambda a, b: torch_npu.npu_bmmV2(a, b, []).relu(), lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
    "sort_v2": (lambda x: torch_npu.npu_sort_v2(x, dim=-1, descending=True) + 0, lambda: (torch.randn(3, 7),)),
    "max": (lambda x: torch_npu.npu_max(x, 1), lambda: (torch.randn(3, 7),)),
    "min": (lambda x: torch_npu.npu_min(x, 0, keepdim=True), lambda: (torch.randn(3, 7),)),
    "softmax_cross_entropy_with_logits": (
        lambda x, y: torch_npu.npu_softmax_cross_entropy_with_logits(x, y) * 2,
        lambda: (torch.randn(4, 5), torch.eye(5)[:4])),
    "bounding_box_encode": (lambda a, g: torch_npu.npu_bounding_box_encode(a, g, 0, 0, 0, 0, 0.1, 0.1, 0.2, 0.2),
                            lambda: (torch.tensor([[1.0, 2, 3, 4]]), torch.tensor([[2.0, 2, 4, 5]]))),
    "bounding_box_decode": (lambda r, d: torch_npu.npu_bounding_box_decode(r, d, 0, 0, 0, 0, 1, 1, 1, 1, (10, 10), 0.1),
                            lambda: (torch.tensor([[1.0, 2, 3, 4]]), torch.tensor([[0.1, 0.2, 0.0, 0.1]]))),
    "float_status": (lambda x: torch_npu.npu_clear_float_status(torch_npu.npu_alloc_float_status(x)),
                     lambda: (torch.randn(8),)),
}


def test_every_npu_op_has_a_meta_kernel():
    # torch_npu's own ops (the samples' npu_add_custom, defined by user code, may be registered too).
    # Every overload ("npu::_npu_dropout_gen_mask.Tensor") by its full name.
    names = sorted({op.split("::", 1)[1] for op in torch._C._dispatch_get_all_op_names()
                    if op.startswith("npu::")} - {"npu_add_custom"})
    assert len(names) > 30, names
    missing = [name for name in names
               if not torch._C._dispatch_has_kernel_for_dispatch_key(f"npu::{name}", "Meta")
               and not torch._C._dispatch_has_kernel_for_dispatch_key(f"npu::{name}", "CompositeImplicitAutograd")]
    assert not missing, f"npu ops without a Meta kernel: {missing}"


@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_every_npu_op_compiles_fullgraph_with_the_npu_backend(name):
    fn, make = GRAPH_CASES[name]
    args = [t.to(NPU) for t in make()]
    expected = fn(*args)
    actual = torch.compile(fn, backend="npu", fullgraph=True)(*args)
    for a, e in zip(actual if isinstance(actual, tuple) else (actual,),
                    expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(a.cpu(), e.cpu(), atol=1e-3, rtol=1e-3)


# ---- the custom-op sample (eager registration + Meta + converter + torchair backend) ---------------

SAMPLE = r'''
import torch
import torch_npu
import torchair
from typing import Any
from torch_npu.dynamo.device_op import run_device_op

# --- the op package's PyTorch side (what op-plugin's yaml entry and AddCustomKernelNpuApi.cpp do)
lib = torch.library.Library("npu", "FRAGMENT")
lib.define("npu_add_custom(Tensor x, Tensor y) -> Tensor")
eager_calls = []

@torch.library.impl(lib, "npu_add_custom", "PrivateUse1")
def npu_add_custom_npu(x, y):
    eager_calls.append(1)
    z = torch.empty_like(x)
    run_device_op("aclnnAddCustom", "ttt", [x, y, z])
    return z

torch_npu.npu_add_custom = torch.ops.npu.npu_add_custom

# --- the sample, as written for torch_npu
from torch_npu.testing.testcase import TestCase, run_tests
torch.npu.config.allow_internal_format = False
torch.npu.set_compile_mode(jit_compile=False)

from torch_npu.meta._meta_registrations import m
from torch.library import impl
@impl(m, "npu_add_custom")
def npu_add_custom_meta(x, y):
    return torch.empty_like(x)

from torchair import register_fx_node_ge_converter
from torchair.ge import Tensor
@register_fx_node_ge_converter(torch.ops.npu.npu_add_custom.default)
def convert_npu_add_custom(x: Tensor, y: Tensor, z: Tensor = None, meta_outputs: Any = None):
    return torchair.ge.custom_op(
        "AddCustom",
        inputs={
            "x": x,
            "y": y,
        },
        outputs=['z']
    )

class TestCustomAdd(TestCase):
    def test_add_custom(self):
        length = [8, 2048]
        x = torch.rand(length, device='cpu', dtype=torch.float16)
        y = torch.rand(length, device='cpu', dtype=torch.float16)
        output = torch_npu.npu_add_custom(x.npu(), y.npu()).cpu()
        self.assertRtolEqual(output, x + y)

class TestTorchCompileCustomAdd(TestCase):
    def test_add_custom(self):
        x = torch.randn([8, 2048], device='npu', dtype=torch.float16)
        y = torch.randn([8, 2048], device='npu', dtype=torch.float16)
        from torchair.configs.compiler_config import CompilerConfig
        config = CompilerConfig()
        npu_backend = torchair.get_npu_backend(compiler_config=config)
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
            def forward(self, x, y):
                result = torch_npu.npu_add_custom(x, y)
                return result
        mod = torch.compile(Module().npu(), backend=npu_backend)
        before = len(eager_calls)
        torch.npu.op_stats(reset=True)
        output = mod(x, y)
        self.assertRtolEqual(output, (x + y))
        # inside the graph the op ran as the device op, not through its eager kernel
        assert len(eager_calls) == before, eager_calls
        assert torch.npu.op_stats()["aclnnAddCustom"]["device_op"] == 1

if __name__ == "__main__":
    run_tests()
'''


SAMPLE_002 = r'''
import torch
import torch_npu
import torchair
from typing import Any
from torchair import register_fx_node_ge_converter
from torchair.ge import Tensor
from torch_npu.testing.testcase import TestCase, run_tests
import custom_ops

# meta_outputs: the parameter name is fixed
@register_fx_node_ge_converter(torch.ops.myops.add_custom.default)
def convert_npu_add_custom(x: Tensor, y: Tensor, z: Tensor = None, meta_outputs: Any = None):
    return torchair.ge.custom_op("AddCustom", inputs={"x": x, "y": y,}, outputs=['z'])

class TestTorchCompileCustomAdd(TestCase):
    def test_add_custom(self):
        x = torch.randn([8, 2048], device='npu', dtype=torch.float16)
        y = torch.randn([8, 2048], device='npu', dtype=torch.float16)
        from torchair.configs.compiler_config import CompilerConfig
        config = CompilerConfig()
        npu_backend = torchair.get_npu_backend(compiler_config=config)
        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
            def forward(self, x, y):
                result = custom_ops.add_custom(x, y)
                return result
        mod = torch.compile(Module().npu(), backend=npu_backend)
        output = mod(x, y)
        self.assertRtolEqual(output, (x + y))

if __name__ == "__main__":
    run_tests()
'''

# Runs each sample as its own __main__ (their run_tests() exits), in one interpreter.
RUN_SAMPLES = r'''
import runpy, sys
for path in sys.argv[1:]:
    sys.argv = [path]  # what `python path` would see
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            raise
'''


def test_graph_mode_samples_with_the_example_op_package(tmp_path):
    """The custom-op samples' graph-mode scripts, unchanged: the op-plugin style npu_add_custom (Meta via
    torch_npu.meta._meta_registrations.m, converter, torchair backend) and the C++-extension style
    custom_ops.add_custom, on the example AddCustom op package."""
    import extension_builds

    opp_root = extension_builds.add_custom_package()
    custom_ops_dir = extension_builds.add_custom_extension()
    (tmp_path / "test_ops_custom_register_in_graph.py").write_text(SAMPLE)
    (tmp_path / "test_add_custom_graph.py").write_text(SAMPLE_002)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NPU_SIM_FALLBACK")}
    env.update(ASCEND_CUSTOM_OPP_PATH=opp_root, PYTHONPATH=custom_ops_dir, TORCHINDUCTOR_COMPILE_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", RUN_SAMPLES, "test_ops_custom_register_in_graph.py",
                           "test_add_custom_graph.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.count("\nOK") == 2, proc.stderr

"""Builds of the example extensions and op packages, shared by the tests that use them.

Each build runs at most once per installed torch_npu: its outputs go to build/test-extensions/<key>/
in the source checkout (key = a hash of the example sources and of the installed SDK),
so later test sessions reuse them. A file lock keeps concurrent pytest processes from building the
same thing twice. Compilers go through ccache when it is installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time

import torch_npu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
CACHE = os.path.join(REPO, "build", "test-extensions")
PACKAGE_DIR = os.path.dirname(os.path.abspath(torch_npu.__file__))

# Seconds each build took in this session (reported by the tests that trigger them).
BUILD_TIMES: dict[str, float] = {}


def _fingerprint(*paths: str, text: str = "") -> str:
    """Hash of the given sources and of the installed SDK (headers and libraries): a reinstall of the
    same build keeps the key, any change to what extensions compile or link against changes it."""
    digest = hashlib.sha256(text.encode())
    for path in (os.path.join(PACKAGE_DIR, "include"), os.path.join(PACKAGE_DIR, "lib"), *paths):
        files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "**", "*"), recursive=True))
        for f in files:
            if os.path.isfile(f):
                digest.update(f.encode())
                with open(f, "rb") as fh:
                    digest.update(fh.read())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(name: str):
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def compiler_env() -> dict[str, str]:
    """The environment for builds: ccache'd compilers when available, one job (2-core machines)."""
    env = dict(os.environ)
    # The venv's cmake and ninja (requirements-dev.txt), whether or not the venv is activated.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if os.path.isdir("/usr/lib/ccache") and "CXX" not in env:
        env["CC"] = "/usr/lib/ccache/gcc"
        env["CXX"] = "/usr/lib/ccache/g++"
    env.setdefault("MAX_JOBS", "2")
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    return env


def _run(cmd: list[str], cwd: str, env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}) in {cwd}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def _cached(name: str, sources: list[str], build, text: str = "") -> str:
    """Runs build(out_dir) unless out_dir (keyed by the sources) is already complete; returns out_dir."""
    out = os.path.join(CACHE, f"{name}-{_fingerprint(*sources, text=text)}")
    with _locked(name):
        if not os.path.exists(os.path.join(out, ".complete")):
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            start = time.perf_counter()
            build(out)
            BUILD_TIMES[name] = time.perf_counter() - start
            open(os.path.join(out, ".complete"), "w").close()
    return out


def cmake_op_package(name: str, source_dir: str, prefix: str, vendor: str, extra: tuple[str, ...] = ()) -> None:
    """Configures, builds and installs a custom op package (find_package(TorchNpu)) into prefix."""
    env = compiler_env()
    build_dir = os.path.join(os.path.dirname(prefix), f"{name}-cmake")
    cmake = [shutil.which("cmake", path=env["PATH"]) or "cmake"]
    _run(cmake + ["-S", source_dir, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCMAKE_PREFIX_PATH={torch_npu.utils.cmake_prefix_path}", f"-DOPP_VENDOR={vendor}", *extra],
         REPO, env)
    _run(cmake + ["--build", build_dir], REPO, env)
    _run(cmake + ["--install", build_dir, "--prefix", prefix], REPO, env)


def add_custom_package() -> str:
    """examples/custom_op_package/op_package installed as vendor "customize" of an opp root; returns the root."""
    source = os.path.join(EXAMPLES, "custom_op_package", "op_package")

    def build(out):
        cmake_op_package("add_custom", source, os.path.join(out, "opp"), "customize")

    return os.path.join(_cached("add-custom-package", [source], build), "opp")


def add_custom_extension() -> str:
    """The route-2 extension (examples/custom_op_package/extension) built just in time with
    torch_npu.utils.cpp_extension.load in a child process; returns the directory of custom_ops.so."""
    source = os.path.join(EXAMPLES, "custom_op_package", "extension", "csrc", "add_custom.cpp")

    def build(out):
        code = (
            "import torch_npu.utils.cpp_extension as ext\n"
            f"ext.load(name='custom_ops', sources=[{source!r}], build_directory={out!r})\n"
        )
        _run([sys.executable, "-c", code], out, compiler_env())

    return _cached("add-custom-extension", [source], build)


def kernel_launch_wheel() -> str:
    """examples/cpp_extension built with `python setup.py bdist_wheel` and pip-installed into a
    target directory; returns that directory (put it on sys.path)."""
    source = os.path.join(EXAMPLES, "cpp_extension")

    def build(out):
        work = os.path.join(out, "src")
        shutil.copytree(source, work, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
        env = compiler_env()
        _run([sys.executable, "setup.py", "-q", "bdist_wheel"], work, env)
        wheels = glob.glob(os.path.join(work, "dist", "*.whl"))
        assert len(wheels) == 1, wheels
        _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
              os.path.join(out, "site"), wheels[0]], work, env)

    return os.path.join(_cached("kernel-launch-wheel", [source], build), "site")


def layered_opp_root() -> str:
    """An opp root with three vendors, in load order: "broken" (a text file named libcust_opapi.so),
    "override" (tests/op_packages/mul_override: replaces the built-in aclnnMul) and "customize" (the
    example aclnnAddCustom package). Returns the root."""
    example = os.path.join(EXAMPLES, "custom_op_package", "op_package")
    override = os.path.join(REPO, "tests", "op_packages", "mul_override")

    def build(out):
        root = os.path.join(out, "opp")
        cmake_op_package("add_custom", example, root, "customize")
        cmake_op_package("mul_override", override, root, "override")
        broken = os.path.join(root, "vendors", "broken", "op_api", "lib")
        os.makedirs(broken)
        with open(os.path.join(broken, "libcust_opapi.so"), "w") as f:
            f.write("not a shared library\n")
        with open(os.path.join(root, "vendors", "config.ini"), "w") as f:
            f.write("load_priority=broken,override,customize\n")

    return os.path.join(_cached("layered-opp", [example, override], build), "opp")


# A JIT extension (load_inline) with a kernel that checks its input, an op calling an aclnn op no
# package provides, and a CPU op for the TorchScript exporter's symbolic registration.
KERNEL_CHECKS_SOURCE = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include "npu/kernel_launch.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/utils/OpAdapter.h"

// out[i] = 2 * x[i], refusing elements above `limit`.
__global__ __aicore__ void checked_double(GM_ADDR x, GM_ADDR out, uint32_t n, float limit) {
  const int64_t per = (n + GetBlockNum() - 1) / GetBlockNum();
  for (int64_t i = GetBlockIdx() * per; i < (GetBlockIdx() + 1) * per && i < n; ++i) {
    const float v = reinterpret_cast<const float*>(x)[i];
    ascendc_assert(v <= limit, "element %ld is %g, above the limit %g", static_cast<long>(i), v, limit);
    reinterpret_cast<float*>(out)[i] = 2 * v;
  }
}

at::Tensor double_checked(const at::Tensor& x, double limit) {
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat && x.is_contiguous(), "double_checked: contiguous float32 only");
  at::Tensor out = at::empty_like(x);
  auto stream = c10_npu::getCurrentNPUStream().stream(false);
  auto* xp = static_cast<uint8_t*>(x.data_ptr());
  auto* op = static_cast<uint8_t*>(out.data_ptr());
  const auto n = static_cast<uint32_t>(x.numel());
  at_npu::native::OpCommand::RunOpApi("checked_double", [=]() -> int {
    return ACLRT_LAUNCH_KERNEL(checked_double)(8, stream, xp, op, n, static_cast<float>(limit));
  });
  return out;
}

at::Tensor missing_op(const at::Tensor& x) {
  at::Tensor out = at::empty_like(x);
  EXEC_NPU_CMD(aclnnNoSuchOp, x, out);
  return out;
}

at::Tensor custom_add(const at::Tensor& a, const at::Tensor& b) { return a + b; }

// EXEC_NPU_CMD calls whose arguments do not fit the op (each must raise, naming the argument), and
// integer literals where an op takes int64 (widened, so -1 arrives as -1).
at::Tensor add_int_alpha(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty_like(a);
  EXEC_NPU_CMD(aclnnAdd, a, b, 1, out);  // aclnnAdd's alpha is an aclScalar*
  return out;
}
at::Tensor add_without_alpha(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty_like(a);
  EXEC_NPU_CMD(aclnnAdd, a, b, out);
  return out;
}
at::Tensor add_scalar_alpha(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty_like(a);
  at::Scalar alpha = 2;
  EXEC_NPU_CMD(aclnnAdd, a, b, alpha, out);
  return out;
}
at::Tensor muls_double(const at::Tensor& a) {
  at::Tensor out = at::empty_like(a);
  EXEC_NPU_CMD(aclnnMuls, a, 2.0, out);  // aclnnMuls's other is an aclScalar*
  return out;
}
at::Tensor softmax_int_dim(const at::Tensor& a) {
  at::Tensor out = at::empty_like(a);
  EXEC_NPU_CMD(aclnnSoftmax, a, -1, out);  // an int where the op takes int64_t dim
  return out;
}
at::Tensor custom_add_extra(const at::Tensor& x) {
  at::Tensor out = at::empty_like(x);
  EXEC_NPU_CMD(aclnnAddCustom, x, x, 3, out);  // the package's header says (x, y, out)
  return out;
}

TORCH_LIBRARY(kernel_checks, m) {
  m.def("double_checked(Tensor x, float limit) -> Tensor");
  m.def("missing_op(Tensor x) -> Tensor");
  m.def("add_int_alpha(Tensor a, Tensor b) -> Tensor");
  m.def("add_without_alpha(Tensor a, Tensor b) -> Tensor");
  m.def("add_scalar_alpha(Tensor a, Tensor b) -> Tensor");
  m.def("muls_double(Tensor a) -> Tensor");
  m.def("softmax_int_dim(Tensor a) -> Tensor");
  m.def("custom_add_extra(Tensor x) -> Tensor");
}
TORCH_LIBRARY_IMPL(kernel_checks, PrivateUse1, m) {
  m.impl("double_checked", &double_checked);
  m.impl("missing_op", &missing_op);
  m.impl("add_int_alpha", &add_int_alpha);
  m.impl("add_without_alpha", &add_without_alpha);
  m.impl("add_scalar_alpha", &add_scalar_alpha);
  m.impl("muls_double", &muls_double);
  m.impl("softmax_int_dim", &softmax_int_dim);
  m.impl("custom_add_extra", &custom_add_extra);
}
TORCH_LIBRARY(custom_namespace, m) {
  m.def("custom_add(Tensor self, Tensor other) -> Tensor", &custom_add);
}
"""


def kernel_checks_extension() -> str:
    """Builds (and loads into this process) the load_inline extension above; returns its library."""
    import torch_npu.utils.cpp_extension as npu_ext

    def build(out):
        env = compiler_env()
        saved = {k: os.environ.get(k) for k in ("CC", "CXX", "MAX_JOBS", "PATH")}
        os.environ.update({k: env[k] for k in saved if k in env})
        try:
            npu_ext.load_inline(name="kernel_checks", cpp_sources=KERNEL_CHECKS_SOURCE, build_directory=out,
                                is_python_module=False)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    out = _cached("kernel-checks", [], build, text=KERNEL_CHECKS_SOURCE)
    library = os.path.join(out, "kernel_checks.so")
    import torch

    torch.ops.load_library(library)  # a no-op when the build just loaded it
    return library

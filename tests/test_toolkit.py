"""The CANN-shaped toolkit shipped with the package: ASCEND_HOME_PATH at import, its layout and
version files as CANN tools read them, set_env.sh, npu-smi, and C programs written against ACL that
compile against its headers, link -lascendcl / -lopapi and run on the software NPU."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

import torch_npu
from torch_npu.utils import _toolkit_layout

HERE = os.path.dirname(os.path.abspath(__file__))
HOME = torch_npu.utils.get_toolkit_path()
CC = shutil.which("cc") or shutil.which("gcc")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_") and not k.startswith("NPU_SIM")}
    env.update(extra)
    return env


def test_toolkit_layout_and_version_files_agree_with_the_runtime():
    assert HOME is not None
    for header in ("acl/acl.h", "acl/acl_rt.h", "acl/acl_base.h", "aclnn/aclnn_base.h", "aclnnop/aclnn_add.h",
                   "npu/runtime.h", "npu/opslib.h"):
        assert os.path.isfile(os.path.join(HOME, "include", header)), header
    for name in _toolkit_layout.LIBRARIES:
        assert os.path.isfile(os.path.join(HOME, "lib64", name)), name  # links resolve
    # DeepSpeed's NPU op builder: the first ascend_*_install.info under ASCEND_HOME_PATH, "version=".
    infos = [os.path.join(d, f) for d, _, files in os.walk(HOME) for f in files
             if re.match(r"ascend_.*_install\.info", f)]
    assert infos
    version = [line.strip().split("=")[-1] for line in open(infos[0]) if "version" in line][0]
    assert version == torch_npu.utils.get_cann_version()
    assert os.access(os.path.join(HOME, "bin", "npu-smi"), os.X_OK)


def test_import_sets_ascend_home_path_unless_the_user_did(tmp_path):
    code = "import os, torch, torch_npu; print(os.environ['ASCEND_HOME_PATH']); print(os.environ['ASCEND_TOOLKIT_HOME'])"
    out = subprocess.run([sys.executable, "-c", code], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [HOME, HOME]
    mine = str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")
    out = subprocess.run([sys.executable, "-c", code], env=_env(ASCEND_HOME_PATH=mine, ASCEND_TOOLKIT_HOME=mine),
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert out == [mine, mine]


def test_set_env_sh_exports_what_cann_set_env_does():
    script = f"source {HOME}/set_env.sh && echo $ASCEND_HOME_PATH && echo $ASCEND_TOOLKIT_HOME && " \
             "echo $LD_LIBRARY_PATH && command -v npu-smi"
    lines = subprocess.run(["bash", "-c", script], env=_env(PATH=os.environ["PATH"]), capture_output=True,
                           text=True, check=True).stdout.split()
    assert lines[0] == HOME and lines[1] == HOME
    assert lines[2].split(":")[0] == os.path.join(HOME, "lib64")
    assert lines[3] == os.path.join(HOME, "bin", "npu-smi")


def test_npu_smi_reports_the_software_npus():
    smi = os.path.join(HOME, "bin", "npu-smi")
    listing = subprocess.run([smi, "info", "-l"], env=_env(NPU_SIM_DEVICES="3"), capture_output=True, text=True,
                             check=True).stdout
    assert re.search(r"Total Count\s*:\s*3", listing)
    assert len(re.findall(r"NPU ID\s*:", listing)) == 3
    table = subprocess.run([smi, "info"], env=_env(NPU_SIM_DEVICES="2", NPU_SIM_MEMORY="4G",
                                                   NPU_SIM_SOC_VERSION="Ascend910B3"),
                           capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"^\| (\d+)\s+(910B3)\s+\| OK", table, re.M)
    assert [r[0] for r in rows] == ["0", "1"]
    assert "0    / 4096" in table  # HBM usage / capacity in MB
    bad = subprocess.run([smi, "bogus"], env=_env(), capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: npu-smi info" in bad.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The test programs, compiled once against the toolkit's headers and libraries."""
    if CC is None:
        pytest.skip("no C compiler on this machine")
    out = tmp_path_factory.mktemp("acl_programs")
    inc, lib = os.path.join(HOME, "include"), os.path.join(HOME, "lib64")
    src = os.path.join(HERE, "toolkit")

    def cc(*args):
        subprocess.run([CC, "-Wall", "-Wextra", "-Werror", *args], check=True, capture_output=True, text=True)

    cc("-o", str(out / "acl_program"), os.path.join(src, "acl_program.c"), f"-I{inc}", f"-L{lib}", "-lascendcl",
       "-lopapi")
    cc("-x", "c++", "-std=c++17", "-o", str(out / "acl_program_cxx"), os.path.join(src, "acl_program.c"),
       f"-I{inc}", f"-L{lib}", "-lascendcl", "-lopapi")
    cc("-shared", "-fPIC", "-o", str(out / "libscale.so"), os.path.join(src, "kernel_binary.c"), f"-I{inc}",
       f"-L{lib}", "-lnpu_runtime")
    cc("-o", str(out / "kernel_program"), os.path.join(src, "kernel_program.c"), f"-I{inc}", f"-L{lib}",
       "-lascendcl")
    return out


def _run(program, *args):
    env = _env(LD_LIBRARY_PATH=os.path.join(HOME, "lib64"))
    return subprocess.run([str(program), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", ["acl_program", "acl_program_cxx"])
def test_acl_program_runs_an_aclnn_op_against_its_cpu_result(built, name):
    proc = _run(built / name)
    assert proc.returncode == 0, proc.stderr
    fields = dict(re.findall(r"(\w+)=(\S+)", proc.stdout))
    assert fields["devices"] == "8" and fields["device"] == "1" and fields["soc"] == "Ascend910B1"
    # out = a + 2 * b computed by aclnnAdd on the device, checked against the host's sum.
    a = torch.arange(1024, dtype=torch.float32)
    assert float(fields["sum"]) == float(fields["expected"]) == float((a + 2 * (0.5 * a)).sum())
    assert fields["flag"] == "42" and fields["status"] == "1"
    assert fields["elapsed_ok"] == "1" and fields["mem_ok"] == "1"
    assert fields["too_big"] == "100000" and "larger than destMax" in proc.stdout  # ACL_ERROR_INVALID_PARAM
    assert fields["finalize_again"] == "100001"  # ACL_ERROR_UNINITIALIZE


def test_kernel_binary_launch_with_acl_runs_every_block(built):
    proc = _run(built / "kernel_program", str(built / "libscale.so"))
    assert proc.returncode == 0, proc.stderr
    assert "wrong=0" in proc.stdout
    assert "not_found=100000" in proc.stdout


def test_read_only_package_gets_a_toolkit_copy_in_the_cache(tmp_path, monkeypatch):
    package_toolkit = os.path.join(os.path.dirname(os.path.dirname(_toolkit_layout.__file__)), "toolkit")
    real_link = _toolkit_layout._link
    calls = []

    def link(home, lib_dir, relative):
        calls.append(home)
        if home == package_toolkit:
            raise PermissionError(13, "Permission denied", home)
        real_link(home, lib_dir, relative)

    monkeypatch.setattr(_toolkit_layout, "_link", link)
    monkeypatch.setattr(_toolkit_layout, "_complete", lambda home: home != package_toolkit and
                        all(os.path.exists(os.path.join(home, "lib64", n)) for n in _toolkit_layout.LIBRARIES))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = _toolkit_layout.ensure()
    assert home.startswith(str(tmp_path)) and calls == [package_toolkit, home]
    assert os.path.isfile(os.path.join(home, "include", "acl", "acl.h"))
    assert os.path.realpath(os.path.join(home, "lib64", "libopapi.so")).endswith("libnpu_opslib.so")
    assert _toolkit_layout.ensure() == home  # complete now: reused

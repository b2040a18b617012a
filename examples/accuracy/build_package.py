"""Builds wrong_gelu_package.cpp into DIR/libwrong_gelu.so (a custom op package directory for
ASCEND_CUSTOM_OPP_PATH). Usage: python build_package.py DIR"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def build(out_dir: str) -> str:
    import torch_npu

    lib_dir = os.path.join(os.path.dirname(torch_npu.__file__), "lib")
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, "libwrong_gelu.so")
    subprocess.run(["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                    "-I", os.path.join(REPO, "opslib", "include"), "-I", os.path.join(REPO, "runtime", "include"),
                    os.path.join(HERE, "wrong_gelu_package.cpp"), "-o", target,
                    "-L", lib_dir, "-lnpu_opslib", f"-Wl,-rpath,{lib_dir}"], check=True)
    return target


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "opp")))

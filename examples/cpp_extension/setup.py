"""Builds op_extension, whose torch.ops.npu.my_add launches a kernel directly on the npu stream.

    python setup.py bdist_wheel && pip install dist/*.whl     # or: pip install --no-build-isolation .
"""

import glob
import os

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension

from torch_npu.utils.cpp_extension import NpuExtension

BASE_DIR = os.path.dirname(os.path.realpath(__file__))
sources = sorted(glob.glob(os.path.join(BASE_DIR, "csrc", "**", "*.cpp"), recursive=True))

setup(
    name="op_extension",
    version="0.1",
    packages=find_packages(include=["op_extension"]),
    # A library of torch ops (loaded with torch.ops.load_library), not a Python module.
    ext_modules=[NpuExtension(name="op_extension.custom_ops_lib", sources=sources, py_limited_api=True)],
    cmdclass={"build_ext": BuildExtension},
)

"""Builds the custom_ops extension (myops::add_custom on npu through the custom op package).

    python setup.py bdist_wheel && pip install dist/*.whl     # or: pip install --no-build-isolation .

The op package itself is built with CMake (../op_package) and found at run time through
ASCEND_CUSTOM_OPP_PATH.
"""

import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from torch_npu.utils.cpp_extension import NpuExtension

BASE_DIR = os.path.dirname(os.path.realpath(__file__))

setup(
    name="custom_ops",
    version="1.0",
    ext_modules=[NpuExtension(name="custom_ops", sources=glob.glob(os.path.join(BASE_DIR, "csrc", "*.cpp")))],
    cmdclass={"build_ext": BuildExtension},
)

"""torch_npu's version, in a module of its own so that submodules read it without importing the package."""

__version__ = "0.1.0"

"""PyTorch OpInfo conformance tests for npu (a package so its conftest does not shadow tests/conftest.py)."""

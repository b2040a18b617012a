"""A project library with a CUDA build and an npu build of its kernels (fixture)."""


def setup(device, workers):
    """The kernel library in use for `device`."""
    return f"{device}-kernels/{workers}"

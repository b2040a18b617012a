"""torch.npu.aclnn.backends: what the aclnn operator library is."""


def version() -> str:
    """The aclnn library's version: the CANN version the device reports."""
    from torch_npu.npu.utils import get_cann_version

    return get_cann_version()

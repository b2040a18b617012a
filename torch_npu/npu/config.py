"""torch.npu.config: process-wide switches of the npu backend."""


class _NpuConfig:
    """torch.npu.config.allow_internal_format (default False, as in torch_npu): whether ops may keep
    tensors in private (device-internal) storage formats. The software NPU's tensors are ND unless
    npu_format_cast asks for another format."""

    __slots__ = ("_allow_internal_format",)

    def __init__(self):
        self._allow_internal_format = False

    @property
    def allow_internal_format(self) -> bool:
        return self._allow_internal_format

    @allow_internal_format.setter
    def allow_internal_format(self, value) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"torch.npu.config.allow_internal_format must be a bool, got {type(value).__name__}")
        self._allow_internal_format = value

    def __repr__(self) -> str:
        return f"torch.npu.config(allow_internal_format={self.allow_internal_format})"


config = _NpuConfig()

"""torch.npu.config: process-wide switches of the npu backend."""

from torch_npu import _C


class _NpuConfig:
    """torch.npu.config.allow_internal_format (default False, as in torch_npu): when True, ops may
    keep and return private storage formats (convolution and batch norm NC1HWC0 with FRACTAL_Z
    weights, matmul FRACTAL_NZ, elementwise ops the format their inputs share) without TransData;
    when False every op works on base formats and returns them (private inputs are converted through
    TransData). npu_format_cast works either way. docs/formats.md has the details."""

    __slots__ = ()

    @property
    def allow_internal_format(self) -> bool:
        return _C._get_allow_internal_format()

    @allow_internal_format.setter
    def allow_internal_format(self, value) -> None:
        # Also the option's own spellings, as torch_npu._C._npu_getOption("ALLOW_INTERNAL_FORMAT") returns them
        # (tests save that value and assign it back).
        spelled = {"enable": True, "disable": False, b"enable": True, b"disable": False}
        if isinstance(value, (str, bytes)) and value in spelled:
            value = spelled[value]
        if not isinstance(value, bool):
            raise TypeError("torch.npu.config.allow_internal_format must be a bool (or 'enable' / 'disable'), got "
                            f"{value!r}")
        _C._set_allow_internal_format(value)

    def __repr__(self) -> str:
        return f"torch.npu.config(allow_internal_format={self.allow_internal_format})"


config = _NpuConfig()

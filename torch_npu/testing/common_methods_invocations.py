"""Sample-input generators for OpInfo-style tests of npu ops, where npu's tests want other samples than
PyTorch's common_methods_invocations (a tensor second argument to normal, empty inputs to median)."""

from functools import partial

from torch.testing import make_tensor
from torch.testing._internal import common_methods_invocations as _cmi
from torch.testing._internal.common_methods_invocations import sample_inputs_normal_common

__all__ = ["sample_inputs_normal_tensor_second", "sample_inputs_median_custom"]


def sample_inputs_normal_tensor_second(self, device, dtype, requires_grad, **kwargs):
    """normal(mean, std) samples: tensor means with float stds (0.3 and 0), and a tensor mean with a tensor std."""
    cases = [([3, 4], 0.3, {}), ([3, 55], 0, {}), ([5, 6, 7, 8], [5, 6, 7, 8], {})]
    return sample_inputs_normal_common(self, device, dtype, requires_grad, cases, **kwargs)


def sample_inputs_median_custom(self, device, dtype, requires_grad, **kwargs):
    """median samples: empty tensors (2x0 and 0x2) and PyTorch's reduction samples."""
    make_arg = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad)
    for shape in [(2, 0), (0, 2)]:
        yield _cmi.SampleInput(make_arg(shape))
    yield from _cmi.sample_inputs_reduction(self, device, dtype, requires_grad, **kwargs)

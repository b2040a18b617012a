"""torch.npu's backend switches: aclnn.allow_hf32 and flags(), the SDPA backend flags, the linear-algebra
library answer, and deterministic sections of the backward pass."""

import pytest
import torch

import torch_npu  # noqa: F401


def test_aclnn_allow_hf32_is_the_convolution_switch():
    before = torch.npu.conv.allow_hf32
    try:
        torch.npu.conv.allow_hf32 = False
        assert torch.npu.aclnn.allow_hf32 is False
        with torch.npu.aclnn.flags(allow_hf32=True):
            assert torch.npu.aclnn.allow_hf32 is True and torch.npu.conv.allow_hf32 is True
        assert torch.npu.conv.allow_hf32 is False  # restored
        torch.npu.conv.allow_hf32 = True
        assert torch.npu.aclnn.allow_hf32 is True
    finally:
        torch.npu.conv.allow_hf32 = before
    assert torch.npu.aclnn.backends.version() == torch.npu.utils.get_cann_version()


def test_sdp_flags_and_sdp_kernel_restore():
    before = (torch.npu.flash_sdp_enabled(), torch.npu.math_sdp_enabled(), torch.npu.mem_efficient_sdp_enabled())
    with torch.npu.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
        assert (torch.npu.flash_sdp_enabled(), torch.npu.math_sdp_enabled(),
                torch.npu.mem_efficient_sdp_enabled()) == (False, True, False)
        assert torch.backends.cuda.flash_sdp_enabled() is False  # PyTorch's own process-wide flag
    assert (torch.npu.flash_sdp_enabled(), torch.npu.math_sdp_enabled(),
            torch.npu.mem_efficient_sdp_enabled()) == before
    torch.npu.enable_math_sdp(False)
    try:
        assert not torch.npu.math_sdp_enabled()
    finally:
        torch.npu.enable_math_sdp(before[1])


def test_preferred_linalg_library():
    assert torch.npu.preferred_linalg_library() == torch._C._LinalgBackend.Default
    assert torch.npu.preferred_linalg_library("cusolver") == torch._C._LinalgBackend.Default
    with pytest.raises(TypeError):
        torch.npu.preferred_linalg_library(3)


@pytest.mark.parametrize("first,second,after_forward,after_backward", [
    ("enable", None, True, False), ("disable", None, False, True), ("disable", "enable", True, True)])
def test_deterministic_sections_switch_forward_and_backward(first, second, after_forward, after_backward):
    fns = {"enable": torch.npu.enable_deterministic_with_backward,
           "disable": torch.npu.disable_deterministic_with_backward}
    seen = []
    x = torch.ones(2, 2, device="npu", requires_grad=True)
    try:
        y = fns[first](x + 1)
        z = y * 3
        z.register_hook(lambda g: seen.append(torch.are_deterministic_algorithms_enabled()))
        if second:
            z = fns[second](z)
        out = (z * z).sum()
        assert torch.are_deterministic_algorithms_enabled() is after_forward
        out.backward()
        assert torch.are_deterministic_algorithms_enabled() is after_backward
        # The gradient is the identity's: as without the sections.
        torch.testing.assert_close(x.grad.cpu(), torch.full((2, 2), 2 * 3 * 3 * 2.0))
        # The ops between the two sections ran their backward under the forward's state.
        assert seen == [False if second else after_forward]
    finally:
        torch.use_deterministic_algorithms(False)

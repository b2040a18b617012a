"""npu_moe_gating_top_k_softmax_v2 against the documented routing written on CPU (custom_op_refs.py): softmax then
top-k (renorm 0, with and without the full softmax output) and top-k then softmax (renorm 1), ties to the lower
expert, finished rows routed to expert E, 2-D and 3-D inputs in float32 / float16 / bfloat16; Meta shapes, the
device op and clear errors."""

import pytest
import torch

from op_refs import llm_ops as ref
import torch_npu

TOL = {torch.float32: (1e-6, 1e-6), torch.float16: (1e-3, 1e-3), torch.bfloat16: (8e-3, 8e-3)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("renorm", [0, 1])
@pytest.mark.parametrize("shape", [(6, 20), (2, 3, 20)])
def test_gating_top_k_softmax_v2(dtype, renorm, shape):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(dtype)
    x.view(-1, 20)[0, 3:9] = x.view(-1, 20)[0, 12]  # ties: the lower expert comes first
    finished = torch.rand(shape[:-1], generator=g) > 0.6
    for fin in (None, finished):
        for output_softmax in (False, True):
            y, idx, sm = torch_npu.npu_moe_gating_top_k_softmax_v2(
                x.npu(), k=4, finished=fin.npu() if fin is not None else None, renorm=renorm,
                output_softmax=output_softmax)
            ey, eidx, esm = ref.moe_gating_top_k_softmax_v2(x, 4, fin, renorm, output_softmax)
            assert y.dtype == dtype and idx.dtype == torch.int32 and sm.dtype == torch.float32
            assert y.shape == ey.shape and sm.shape == esm.shape
            rtol, atol = TOL[dtype]
            torch.testing.assert_close(y.cpu(), ey, rtol=rtol, atol=atol)
            assert torch.equal(idx.cpu(), eidx)
            if esm.numel():
                torch.testing.assert_close(sm.cpu(), esm, rtol=1e-6, atol=1e-6)
            if fin is not None:  # finished rows go to expert E = 20
                assert fin.any() and (idx.cpu()[fin] == 20).all()


def test_gating_v2_meta_device_op_and_errors():
    x = torch.empty(2, 5, 16, device="meta", dtype=torch.float16)
    y, idx, sm = torch.ops.npu.npu_moe_gating_top_k_softmax_v2(x, k=3, renorm=0, output_softmax=True)
    assert y.shape == (2, 5, 3) and idx.dtype == torch.int32 and sm.shape == (2, 5, 16) and sm.dtype == torch.float32
    _, _, sm = torch.ops.npu.npu_moe_gating_top_k_softmax_v2(x, k=3, renorm=1, output_softmax=True)
    assert sm.shape == (0,)
    before = torch.npu.op_stats().get("aclnnMoeGatingTopKSoftmaxV2", {}).get("device_op", 0)
    torch_npu.npu_moe_gating_top_k_softmax_v2(torch.randn(3, 8).npu(), k=2)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMoeGatingTopKSoftmaxV2"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="k must be in"):
        torch_npu.npu_moe_gating_top_k_softmax_v2(torch.randn(3, 8).npu(), k=9)
    with pytest.raises(ValueError, match="renorm must be 0"):
        torch_npu.npu_moe_gating_top_k_softmax_v2(torch.randn(3, 8).npu(), k=2, renorm=2)
    with pytest.raises(TypeError, match="finished must be bool"):
        torch_npu.npu_moe_gating_top_k_softmax_v2(torch.randn(3, 8).npu(), k=2, finished=torch.ones(3).npu())
    with pytest.raises(TypeError, match="float16, float32 or bfloat16"):
        torch_npu.npu_moe_gating_top_k_softmax_v2(torch.ones(3, 8, dtype=torch.int32).npu(), k=2)

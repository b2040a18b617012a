"""torch_npu's custom ops inside torch.compile(backend="eager", fullgraph=True): Meta kernels give shapes."""

import pytest
import torch

import torch_npu
from test_custom_ops import close

NPU = "npu"


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="eager", fullgraph=True)


CASES = {
    "rms_norm": (lambda x, g: torch_npu.npu_rms_norm(x, g)[0] * 2, lambda: (torch.randn(2, 8), torch.rand(8))),
    "rotary_mul": (lambda x, c: torch_npu.npu_rotary_mul(x, c, c), lambda: (torch.randn(2, 4, 8), torch.randn(4, 8))),
    "swiglu": (lambda x: torch_npu.npu_swiglu(x) + 1, lambda: (torch.randn(3, 8),)),
    "fast_gelu": (lambda x: x.npu_fast_gelu(), lambda: (torch.randn(3, 8),)),
    "linear": (lambda x, w: torch_npu.npu_linear(x, w), lambda: (torch.randn(3, 4), torch.randn(5, 4))),
    "dtype_cast": (lambda x: torch_npu.npu_dtype_cast(x, torch.float16), lambda: (torch.randn(3),)),
    "format_cast": (lambda x: torch_npu.npu_format_cast(x, 29) * 2, lambda: (torch.randn(3),)),
    "broadcast": (lambda x: torch_npu.npu_broadcast(x, [3, 4]), lambda: (torch.randn(1, 4),)),
    "confusion_transpose": (lambda x: torch_npu.npu_confusion_transpose(x, [0, 2, 1], [2, 4, 3], False),
                            lambda: (torch.randn(2, 3, 4),)),
    "one_hot": (lambda x: torch_npu.npu_one_hot(x, depth=4), lambda: (torch.tensor([0, 3, 1]),)),
    "iou": (lambda a, b: torch_npu.npu_iou(a, b), lambda: (torch.tensor([[0.0, 0, 2, 2]]), torch.tensor([[1.0, 1, 3, 3]]))),
    "giou": (lambda a, b: torch_npu.npu_giou(a, b), lambda: (torch.tensor([[0.0], [0], [2], [2]]), torch.tensor([[1.0], [1], [3], [3]]))),
    "roi_align": (lambda f, r: torch_npu.npu_roi_align(f, r, 0.5, 2, 2, 2, 0),
                  lambda: (torch.randn(1, 2, 4, 4), torch.tensor([[0, 0.0, 0, 6, 6]]))),
    "softmax": (lambda x, m: torch_npu.npu_scaled_masked_softmax(x, m, 0.5),
                lambda: (torch.randn(1, 1, 3, 3), torch.rand(1, 1, 3, 3) > 0.5)),
    "nms_v4": (lambda b, s, t: torch_npu.npu_nms_v4(b, s, 3, t, t)[0],
               lambda: (torch.tensor([[0.0, 0, 2, 2], [0.1, 0, 2, 2], [5, 5, 6, 6]]), torch.tensor([0.9, 0.8, 0.7]),
                        torch.tensor(0.5))),
    "fusion_attention": (lambda q: torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", scale=0.5)[0],
                         lambda: (torch.randn(1, 2, 3, 4),)),
    "stride_add": (lambda a, b: torch_npu.npu_stride_add(a, b, 0, 0, 1), lambda: (torch.randn(1, 16, 1, 1),
                                                                               torch.randn(1, 16, 1, 1))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_matches_eager(name):
    fn, make = CASES[name]
    args = [t.to(NPU) for t in make()]
    close(compiled(fn)(*args), fn(*args))


def test_meta_shapes():
    q = torch.empty(2, 5, 16, device="meta")
    out = torch.ops.npu.npu_fusion_attention(q, q, q, 4, "BSH")
    assert out[0].shape == (2, 5, 16) and out[1].shape == (2, 4, 5, 8)
    y, rstd = torch.ops.npu.npu_rms_norm(torch.empty(3, 7, device="meta"), torch.empty(7, device="meta"))
    assert y.shape == (3, 7) and rstd.shape == (3, 1) and rstd.dtype == torch.float32


def test_compiled_training_step():
    lin = torch.randn(6, 4, device=NPU, requires_grad=True)
    gamma = torch.rand(6, device=NPU, requires_grad=True)

    def step(x):
        h = torch_npu.npu_linear(x, lin)
        return torch_npu.npu_rms_norm(h, gamma)[0].npu_fast_gelu().sum()

    x = torch.randn(3, 4, device=NPU)
    compiled(step)(x).backward()
    g_compiled = (lin.grad.clone(), gamma.grad.clone())
    lin.grad = gamma.grad = None
    step(x).backward()
    close(g_compiled[0], lin.grad)
    close(g_compiled[1], gamma.grad)


def test_compiled_attention_backward():
    q = torch.randn(1, 2, 3, 4, device=NPU, requires_grad=True)
    fn = compiled(lambda t: torch_npu.npu_fusion_attention(t, t, t, 2, "BNSD", scale=0.5)[0].sum())
    fn(q).backward()
    g = q.grad.clone()
    q.grad = None
    torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", scale=0.5)[0].sum().backward()
    close(g, q.grad)

"""npu_ffn: act(x W1 + b1) W2 + b2 for one expert and for MoE groups of rows (expert_tokens counts,
expert_tokens_index cumulative ends), every activation, against ATen ops on CPU; Meta kernel, errors."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu


def act(h, name):
    if name in ("geglu", "swiglu", "reglu"):
        a, b = h.chunk(2, -1)
        gate = {"geglu": lambda t: F.gelu(t, approximate="tanh"), "swiglu": F.silu, "reglu": F.relu}[name](a)
        return gate * b
    return {"relu": F.relu, "silu": F.silu, "gelu": lambda t: F.gelu(t, approximate="tanh"),
            "fastgelu": lambda t: t * torch.sigmoid(1.702 * t)}[name](h)


def reference(x, w1, w2, b1, b2, name):
    h = x.float() @ w1.float() + (b1.float() if b1 is not None else 0)
    return act(h, name) @ w2.float() + (b2.float() if b2 is not None else 0)


@pytest.mark.parametrize("name", ["relu", "silu", "gelu", "fastgelu", "geglu", "swiglu", "reglu"])
def test_ffn_single_expert(name):
    g = torch.Generator().manual_seed(0)
    k, n = 16, 24
    x = torch.randn(2, 5, k, generator=g).half()
    w1 = (torch.randn(k, 2 * n if name in ("geglu", "swiglu", "reglu") else n, generator=g) * 0.2).half()
    w2 = (torch.randn(n, k, generator=g) * 0.2).half()
    b1, b2 = torch.randn(w1.shape[1], generator=g).half(), torch.randn(k, generator=g).half()
    out = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), name, bias1=b1.npu(), bias2=b2.npu())
    assert out.shape == x.shape and out.dtype == torch.float16
    torch.testing.assert_close(out.cpu().float(), reference(x, w1, w2, b1, b2, name), rtol=1e-2, atol=1e-2)


def test_ffn_experts():
    g = torch.Generator().manual_seed(1)
    e, k, n = 3, 8, 12
    x = torch.randn(10, k, generator=g).half()
    w1, w2 = (torch.randn(e, k, n, generator=g) * 0.3).half(), (torch.randn(e, n, k, generator=g) * 0.3).half()
    counts = [4, 0, 6]
    out = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", expert_tokens=counts)
    by_index = torch_npu.npu_ffn(x.npu(), w1.npu(), w2.npu(), "relu", expert_tokens_index=[4, 4, 10])
    start = 0
    for i, c in enumerate(counts):
        torch.testing.assert_close(out.cpu()[start:start + c].float(),
                                   reference(x[start:start + c], w1[i], w2[i], None, None, "relu"), rtol=1e-2, atol=1e-2)
        start += c
    assert torch.equal(out.cpu(), by_index.cpu())


def test_meta_and_errors():
    m = lambda *s: torch.empty(*s, device="meta", dtype=torch.float16)  # noqa: E731
    assert torch.ops.npu.npu_ffn(m(3, 8), m(8, 4), m(4, 6), "relu").shape == (3, 6)
    x = torch.randn(2, 8).half().npu()
    with pytest.raises(RuntimeError, match="activation"):
        torch_npu.npu_ffn(x, torch.randn(8, 4).half().npu(), torch.randn(4, 8).half().npu(), "tanh").cpu()
    with pytest.raises(RuntimeError, match="deq_scale1"):
        torch_npu.npu_ffn(x, torch.randn(8, 4).half().npu(), torch.randn(4, 8).half().npu(), "relu",
                          deq_scale1=torch.ones(4).npu()).cpu()
    with pytest.raises(ValueError, match="k of x"):
        torch_npu.npu_ffn(x, torch.randn(6, 4).half().npu(), torch.randn(4, 8).half().npu(), "relu")

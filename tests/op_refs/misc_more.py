"""CPU references for the misc3 ops, from their documented definitions (plain torch on CPU)."""

import torch
import torch.nn.functional as F


def quant_conv2d(x, weight, scale, strides=(1, 1), pads=(0, 0), dilations=(1, 1), groups=1, offset_x=0,
                 output_dtype=torch.float16, bias=None):
    """(conv(int8 x padded with offset_x, int8 weight) [+ int32 bias]) * scale[c_out], in float32, then rounded."""
    xi = F.pad(x.to(torch.float64), (pads[1], pads[1], pads[0], pads[0]), value=float(offset_x))
    acc = F.conv2d(xi, weight.to(torch.float64), None, strides, 0, dilations, groups)
    if bias is not None:
        acc = acc + bias.to(torch.float64).view(1, -1, 1, 1)
    if scale.dtype == torch.int64:  # packed form: float32 bits in bits 0-31
        scale = (scale & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
    return (acc.to(torch.float32) * scale.to(torch.float32).view(1, -1, 1, 1)).to(output_dtype)


def fused_attention_layernorm_qkv_fwd(x, kq, kk, kv, gamma, beta, bq=None, bk=None, bv=None, seq_len=128,
                                      num_heads=12, eps=1e-5):
    """[norm, q, k, v, mean, variance]: layer norm (float32 statistics, biased variance), projections x @ kernel
    + bias of the rounded norm, reshaped (B, S, N, D) and permuted to (B, N, S, D)."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(-1, keepdim=True)
    norm = ((xf - mean) * torch.rsqrt(var + eps) * gamma.float() + beta.float()).to(x.dtype)
    rows, hidden = x.shape
    outs = []
    for k, b in ((kq, bq), (kk, bk), (kv, bv)):
        p = norm.float() @ k.float()
        if b is not None:
            p = p + b.float()
        outs.append(p.to(x.dtype).view(rows // seq_len, seq_len, num_heads, hidden // num_heads).permute(0, 2, 1, 3)
                    .contiguous())
    return [norm, *outs, mean.view(rows).to(kq.dtype), var.view(rows).to(kq.dtype)]


_INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}


def hans_exponent_bytes(x):
    """The exponent byte of every element: the 8 bits just below the sign bit."""
    bits = x.element_size() * 8
    raw = x.contiguous().view(_INT_VIEW[x.dtype]).to(torch.int64) & ((1 << bits) - 1)
    return (raw >> (bits - 9)) & 0xFF


def hans_pdf(x):
    """pdf: how many elements have each exponent byte value, int32 of shape (1, 256)."""
    return torch.bincount(hans_exponent_bytes(x).flatten(), minlength=256).to(torch.int32).view(1, 256)


def hans_buffers(x, reshuff=False, fixed_bytes=None, var_bytes=None):
    """Zeroed pdf / mantissa / fixed / var of upstream's documented sizes (8448 reserve for one vector core)."""
    n, es = x.numel(), x.element_size()
    bound = n + n // 64 + 8448
    fixed_bytes = fixed_bytes if fixed_bytes is not None else (bound if reshuff else n)
    var_bytes = var_bytes if var_bytes is not None else max(bound - fixed_bytes, 0) + es
    to_elems = lambda b: (b + es - 1) // es  # noqa: E731
    return (torch.zeros(1, 256, dtype=torch.int32), torch.zeros(n * (es - 1) // es, dtype=x.dtype),
            torch.zeros(to_elems(fixed_bytes), dtype=x.dtype), torch.zeros(to_elems(var_bytes), dtype=x.dtype))

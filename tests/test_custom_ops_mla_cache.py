"""npu_kv_rmsnorm_rope_cache (MLA): RMSNorm of the latent part and rotary embedding of the de-interleaved rope
part, written into KV caches in every cache mode (Norm, PA_BNSD, PA_NZ, PA_BLK_BNSD, PA_BLK_NZ), int8 caches,
and the V2 form; against the same steps written out on CPU."""

import pytest
import torch

import torch_npu


def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


def expected_rows(kv, gamma, cos, sin, eps, v=None):
    """(k rows [B, S, Dk], ckv rows [B, S, Dc]) in float32."""
    x, c, s = kv.float()[:, 0], cos.float()[:, 0], sin.float()[:, 0]

    def norm(t):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()

    def rope(t):
        b, sq, d = t.shape
        t = t.view(b, sq, d // 2, 2).transpose(-1, -2).reshape(b, sq, d)
        return t * c + rotate_half(t) * s

    if v is None:
        return rope(x[..., 512:]), norm(x[..., :512])
    y = norm(x)
    return torch.cat([rope(y[..., :64]), y[..., 64:]], -1), v.float()[:, 0]


def fill_expected(cache, rows, index, mode, nz_c0=16):
    cache = cache.clone()
    b, s, d = rows.shape
    if mode == "Norm":
        for i in range(b):
            for j in range(s):
                cache[i, 0, index[i, j]] = rows[i, j].to(cache.dtype)
        return cache
    blocks, bs = cache.shape[0], cache.shape[1]
    flat = cache.view(blocks, d // nz_c0, bs, nz_c0) if "NZ" in mode else cache.view(blocks, bs, d)
    pages = (s + bs - 1) // bs
    for i in range(b):
        for j in range(s):
            if "BLK" in mode:
                slot = index[i * pages + j // bs] // bs * bs + j % bs
            else:
                slot = index[i * s + j]
            page, off = slot // bs, slot % bs
            if "NZ" in mode:
                flat[page, :, off] = rows[i, j].to(cache.dtype).view(-1, nz_c0)
            else:
                flat[page, off] = rows[i, j].to(cache.dtype)
    return cache


@pytest.mark.parametrize("mode", ["Norm", "PA_BNSD", "PA_NZ", "PA_BLK_BNSD", "PA_BLK_NZ"])
def test_cache_modes(mode):
    g = torch.Generator().manual_seed(0)
    b, s = 2, 5
    kv = torch.randn(b, 1, s, 576, generator=g).half()
    gamma = torch.randn(512, generator=g).half()
    cos, sin = torch.randn(b, 1, s, 64, generator=g).half(), torch.randn(b, 1, s, 64, generator=g).half()
    if mode == "Norm":
        k_cache, c_cache = torch.zeros(b, 1, 8, 64).half(), torch.zeros(b, 1, 8, 512).half()
        index = torch.tensor([[0, 1, 2, 3, 4], [7, 6, 5, 4, 3]])
    else:
        bs, blocks = 4, 6
        k_cache, c_cache = torch.zeros(blocks, bs, 1, 64).half(), torch.zeros(blocks, bs, 1, 512).half()
        index = torch.tensor([8, 12, 0, 4]) if "BLK" in mode else torch.tensor([3, 9, 10, 17, 2, 20, 21, 22, 23, 5])
    kc, cc = k_cache.npu(), c_cache.npu()
    outs = torch_npu.npu_kv_rmsnorm_rope_cache(kv.npu(), gamma.npu(), cos.npu(), sin.npu(), index.npu(), kc, cc,
                                               cache_mode=mode, is_output_kv=True)
    k_rows, c_rows = expected_rows(kv, gamma, cos, sin, 1e-5)
    tol = dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(kc.cpu().float(), fill_expected(k_cache, k_rows, index, mode).float(), **tol)
    torch.testing.assert_close(cc.cpu().float(), fill_expected(c_cache, c_rows, index, mode).float(), **tol)
    assert outs[0].data_ptr() == kc.data_ptr()  # the caches come back updated in place
    torch.testing.assert_close(outs[2].cpu().float(), k_rows.unsqueeze(1), **tol)
    torch.testing.assert_close(outs[3].cpu().float(), c_rows.unsqueeze(1), **tol)


def test_int8_caches_and_v2():
    g = torch.Generator().manual_seed(1)
    b, s, bs = 1, 3, 4
    kv = torch.randn(b, 1, s, 576, generator=g)
    gamma, cos, sin = torch.randn(512, generator=g), torch.randn(b, 1, s, 64, generator=g), torch.randn(b, 1, s, 64, generator=g)
    k_scale, c_scale = torch.rand(64, generator=g) * 4, torch.rand(512, generator=g) * 4
    kc, cc = torch.zeros(2, bs, 1, 64, dtype=torch.int8).npu(), torch.zeros(2, bs, 1, 512, dtype=torch.int8).npu()
    index = torch.tensor([5, 0, 6])
    torch_npu.npu_kv_rmsnorm_rope_cache(kv.npu(), gamma.npu(), cos.npu(), sin.npu(), index.npu(), kc, cc,
                                        k_rope_scale=k_scale.npu(), c_kv_scale=c_scale.npu(), cache_mode="PA_BNSD")
    k_rows, c_rows = expected_rows(kv, gamma, cos, sin, 1e-5)
    quant = lambda x, sc: torch.round(x * sc).clip(-128, 127).to(torch.int8)  # noqa: E731
    flat_k = kc.cpu().view(-1, 64)
    for j, slot in enumerate(index.tolist()):
        assert (flat_k[slot].int() - quant(k_rows[0, j], k_scale).int()).abs().max() <= 1
    # V2: 192 values normalised, the first 64 rotated; v cached as is.
    kv2, gamma2, v = torch.randn(b, 1, s, 192, generator=g), torch.randn(192, generator=g), torch.randn(b, 1, s, 128, generator=g)
    kc2, cc2 = torch.zeros(2, bs, 1, 192).npu(), torch.zeros(2, bs, 1, 128).npu()
    _, _, k_out, c_out = torch_npu.npu_kv_rmsnorm_rope_cache(kv2.npu(), gamma2.npu(), cos.npu(), sin.npu(),
                                                             index.npu(), kc2, cc2, v=v.npu(), cache_mode="PA_BNSD",
                                                             is_output_kv=True)
    k_rows2, c_rows2 = expected_rows(kv2, gamma2, cos, sin, 1e-5, v=v)
    torch.testing.assert_close(k_out.cpu()[:, 0], k_rows2, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(kc2.cpu().view(-1, 192)[index], k_rows2[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(cc2.cpu().view(-1, 128)[index], c_rows2[0], rtol=1e-5, atol=1e-5)


def test_meta_and_errors():
    m = lambda *s, **kw: torch.empty(*s, device="meta", **kw)  # noqa: E731
    outs = torch.ops.npu.npu_kv_rmsnorm_rope_cache(m(2, 1, 3, 576), m(512), m(2, 1, 3, 64), m(2, 1, 3, 64),
                                                   m(6, dtype=torch.long), m(4, 4, 1, 64), m(4, 4, 1, 512))
    assert outs[2].shape == (2, 1, 3, 64) and outs[3].shape == (2, 1, 3, 512)
    kv = torch.randn(1, 1, 2, 576).npu()
    with pytest.raises(RuntimeError, match="cache_mode"):
        torch_npu.npu_kv_rmsnorm_rope_cache(kv, torch.ones(512).npu(), torch.ones(1, 1, 2, 64).npu(),
                                            torch.ones(1, 1, 2, 64).npu(), torch.tensor([0, 1]).npu(),
                                            torch.zeros(1, 4, 1, 64).npu(), torch.zeros(1, 4, 1, 512).npu(),
                                            cache_mode="Paged")[2].cpu()

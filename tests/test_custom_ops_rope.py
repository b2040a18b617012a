"""The inference rotary embeddings (npu_apply_rotary_pos_emb, npu_interleave_rope, npu_mrope) against their
documented formulas composed of ATen ops on CPU, in every dtype and layout, with Meta kernels."""

import pytest
import torch

import torch_npu
import custom_op_refs as ref

NPU = "npu"
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def check(actual, expected, dtype=torch.float32):
    torch.testing.assert_close(actual.float().cpu(), expected.float().cpu(), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["BSND", "BNSD", "SBND", "TND"])
def test_apply_rotary_pos_emb_in_place(layout, dtype):
    g = torch.Generator().manual_seed(0)
    shape_q = {"BSND": (2, 5, 4, 16), "BNSD": (2, 4, 5, 16), "SBND": (5, 2, 4, 16), "TND": (7, 4, 16)}[layout]
    shape_k = list(shape_q)
    shape_k[{"BSND": 2, "BNSD": 1, "SBND": 2, "TND": 1}[layout]] = 2  # fewer key heads
    shape_c = list(shape_q)
    shape_c[{"BSND": 2, "BNSD": 1, "SBND": 2, "TND": 1}[layout]] = 1
    q, k = torch.randn(shape_q, generator=g).to(dtype), torch.randn(shape_k, generator=g).to(dtype)
    cos, sin = torch.randn(shape_c, generator=g).to(dtype), torch.randn(shape_c, generator=g).to(dtype)
    qn, kn = q.npu(), k.npu()
    q_out, k_out = torch_npu.npu_apply_rotary_pos_emb(qn, kn, cos.npu(), sin.npu(), layout=layout)
    expect_q = ref.rotary_mul(q.float(), cos.float(), sin.float(), "half")
    expect_k = ref.rotary_mul(k.float(), cos.float(), sin.float(), "half")
    for t, e in ((q_out, expect_q), (k_out, expect_k), (qn, expect_q), (kn, expect_k)):  # returned and in place
        check(t, e, dtype)
    qi, ki = q.npu(), k.npu()
    torch_npu.npu_apply_rotary_pos_emb(qi, ki, cos.npu(), sin.npu(), layout=layout, rotary_mode="interleave")
    check(qi, ref.rotary_mul(q.float(), cos.float(), sin.float(), "interleave"), dtype)


def test_apply_rotary_pos_emb_errors():
    q = torch.randn(1, 2, 2, 8).npu()
    with pytest.raises(ValueError, match="layout"):
        torch_npu.npu_apply_rotary_pos_emb(q, q.clone(), q[:, :, :1], q[:, :, :1], layout="NSBD")
    with pytest.raises(ValueError, match="quarter"):
        torch_npu.npu_apply_rotary_pos_emb(q, q.clone(), q[:, :, :1], q[:, :, :1], rotary_mode="quarter")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_interleave_rope(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 5, 64, generator=g).to(dtype)
    cos, sin = (torch.randn(2, 1, 5, 64, generator=g).to(dtype) for _ in range(2))
    out = torch_npu.npu_interleave_rope(x.npu(), cos.npu(), sin.npu())
    b, n, s, d = x.shape
    q = x.float().reshape(b, n, s, d // 2, 2).transpose(-1, -2).reshape(b, n, s, d)
    check(out, ref.rotary_mul(q, cos.float(), sin.float(), "half"), dtype)


def mrope_reference(positions, q, k, cache, head_size, sections, mode, cache_mode):
    rot = cache.shape[1]
    cos_sin = cache[positions]  # [(m,) T, rot]
    cos, sin = cos_sin.chunk(2, -1)
    if positions.dim() == 2:
        if cache_mode == "interleave":
            n = sections[1] * 3
            merged_c, merged_s = cos[0].clone(), sin[0].clone()
            merged_c[..., 1:n:3], merged_s[..., 1:n:3] = cos[1, ..., 1:n:3], sin[1, ..., 1:n:3]
            merged_c[..., 2:n:3], merged_s[..., 2:n:3] = cos[2, ..., 2:n:3], sin[2, ..., 2:n:3]
            cos, sin = merged_c, merged_s
        else:
            cos = torch.cat([m[i] for i, m in enumerate(cos.split(sections, -1))], -1)
            sin = torch.cat([m[i] for i, m in enumerate(sin.split(sections, -1))], -1)

    def apply(x):
        x = x.view(x.shape[0], -1, head_size)
        rot_part, pass_part = x[..., :rot], x[..., rot:]
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        if mode == "half":
            x1, x2 = rot_part.chunk(2, -1)
            out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
        else:
            x1, x2 = rot_part[..., ::2], rot_part[..., 1::2]
            out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
        return torch.cat((out, pass_part), -1).flatten(1)

    return apply(q), apply(k)


@pytest.mark.parametrize("mode", ["half", "interleave"])
@pytest.mark.parametrize("case", ["rope", "mrope", "mrope_interleave_cache"])
def test_mrope(case, mode):
    g = torch.Generator().manual_seed(2)
    t, head, rot = 6, 32, 24
    q, k = torch.randn(t, 4 * head, generator=g), torch.randn(t, 2 * head, generator=g)
    cache = torch.randn(50, rot, generator=g)
    sections, cache_mode = None, "default"
    positions = torch.randint(0, 50, (t,), generator=g)
    if case != "rope":
        sections = [4, 4, 4]
        positions = torch.randint(0, 50, (3, t), generator=g)
        cache_mode = "interleave" if case == "mrope_interleave_cache" else "default"
    qo, ko = torch_npu.npu_mrope(positions.npu(), q.npu(), k.npu(), cache.npu(), head, mrope_section=sections,
                                 rotary_mode=mode, cache_mode=cache_mode)
    eq, ek = mrope_reference(positions, q, k, cache, head, sections, mode, cache_mode)
    check(qo, eq)
    check(ko, ek)


def test_meta_and_device_ops():
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    a, b = torch.ops.npu.npu_apply_rotary_pos_emb(m(1, 2, 3, 8), m(1, 2, 1, 8), m(1, 2, 1, 8), m(1, 2, 1, 8))
    assert a.shape == (1, 2, 3, 8) and b.shape == (1, 2, 1, 8)
    assert torch.ops.npu.npu_interleave_rope(m(1, 2, 3, 64), m(1, 1, 3, 64), m(1, 1, 3, 64)).shape == (1, 2, 3, 64)
    qo, ko = torch.ops.npu.npu_mrope(m(4), m(4, 64), m(4, 32), m(10, 16), 32)
    assert qo.shape == (4, 64) and ko.shape == (4, 32)
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    names = ["aclnnApplyRotaryPosEmbV2", "aclnnInterleaveRope", "aclnnRopeWithSinCosCacheV2"]
    before = [count(x) for x in names]
    x = torch.randn(1, 2, 1, 64).npu()
    torch_npu.npu_apply_rotary_pos_emb(x, x.clone(), x[:, :, :1], x[:, :, :1])
    torch_npu.npu_interleave_rope(x, x[:, :1], x[:, :1])
    torch_npu.npu_mrope(torch.tensor([1]).npu(), x.view(1, 128), x.view(1, 128), torch.randn(4, 32).npu(), 64)
    torch.npu.synchronize()
    assert [count(x) - c for x, c in zip(names, before)] == [1, 1, 1]

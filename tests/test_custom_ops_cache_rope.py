"""KV-cache / RoPE / MLA serving ops (npu_mla_prolog, _v2, _v3, _v3_functional, npu_kv_rmsnorm_rope_cache_v2,
npu_qkv_rms_norm_rope_cache and their functional forms) against the CPU references of
op_refs/cache_rope.py, for float32 / float16 / bfloat16, with Meta kernels, device-op counts and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import cache_rope as ref

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-2, atol=2e-2),
       torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}

# Small MLA sizes: He, Hcq, N heads, D nope, Dr rope, Hckv latent, Nkv cache heads, block size / count.
HE, HCQ, N, D, DR, HCKV, NKV, BLOCK, BLOCKS = 32, 24, 2, 8, 16, 16, 1, 4, 4


def mla_inputs(dtype, lead, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype)

    tokens = 1
    for n in lead:
        tokens *= n
    slots = torch.randperm(BLOCKS * BLOCK, generator=g)[:tokens].reshape(lead).to(torch.int64)
    return dict(
        token_x=rand(*lead, HE), weight_dq=rand(HE, HCQ, scale=HE ** -0.5),
        weight_uq_qr=rand(HCQ, N * (D + DR), scale=HCQ ** -0.5), weight_uk=rand(N, D, HCKV, scale=D ** -0.5),
        weight_dkv_kr=rand(HE, HCKV + DR, scale=HE ** -0.5), rmsnorm_gamma_cq=rand(HCQ, scale=0.1) + 1,
        rmsnorm_gamma_ckv=rand(HCKV, scale=0.1) + 1, rope_sin=rand(*lead, DR).clamp(-1, 1),
        rope_cos=rand(*lead, DR).clamp(-1, 1), cache_index=slots,
        kv_cache=rand(BLOCKS, BLOCK, NKV, HCKV), kr_cache=rand(BLOCKS, BLOCK, NKV, DR))


ORDER = ["token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq",
         "rmsnorm_gamma_ckv", "rope_sin", "rope_cos", "cache_index", "kv_cache", "kr_cache"]


def positional(inputs, device=None):
    return [inputs[k].to(device) if device else inputs[k] for k in ORDER]


def expected(inputs, cache_mode="PA_BSND"):
    return ref.mla_prolog(*positional(inputs), eps_cq=1e-5, eps_ckv=1e-5, cache_mode=cache_mode)


def assert_close(actual, expect, dtype):
    torch.testing.assert_close(actual.cpu().float(), expect.float(), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lead", [(2, 2), (3,)])
@pytest.mark.parametrize("cache_mode", ["PA_BSND", "PA_NZ"])
def test_mla_prolog(dtype, lead, cache_mode):
    inputs = mla_inputs(dtype, lead)
    kv_before = inputs["kv_cache"].clone()
    kv_npu = inputs["kv_cache"].npu()
    q, qr, kv_out, kr_out = torch_npu.npu_mla_prolog(
        *positional(inputs, "npu")[:10], kv_npu, inputs["kr_cache"].npu(), cache_mode=cache_mode)
    eq, eqr, ekv, ekr = expected(inputs, cache_mode)
    assert q.shape == (*lead, N, HCKV) and qr.shape == (*lead, N, DR)
    assert q.dtype == dtype and qr.dtype == dtype and kv_out.dtype == dtype
    assert_close(q, eq, dtype)
    assert_close(qr, eqr, dtype)
    assert_close(kv_out, ekv, dtype)
    assert_close(kr_out, ekr, dtype)
    assert torch.equal(kv_npu.cpu(), kv_before)  # v1 returns updated copies, its inputs stay as they were


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lead", [(2, 2), (3,)])
def test_mla_prolog_v2_updates_caches_in_place(dtype, lead):
    inputs = mla_inputs(dtype, lead, seed=1)
    args = positional(inputs, "npu")
    q, qr, kv_out, kr_out, dq = torch_npu.npu_mla_prolog_v2(*args, rmsnorm_epsilon_cq=1e-5, rmsnorm_epsilon_ckv=1e-5)
    eq, eqr, ekv, ekr = expected(inputs)
    assert q.dtype == dtype and qr.dtype == torch.bfloat16 and dq.shape == (1,) and dq.dtype == torch.float32
    assert_close(q, eq, dtype)
    assert_close(qr, eqr, torch.bfloat16)  # the rope part is always bfloat16
    assert_close(args[10], ekv, dtype)  # the caches passed in are the ones updated
    assert_close(args[11], ekr, dtype)
    assert_close(kv_out, ekv, dtype)


def test_mla_prolog_skips_negative_slots():
    inputs = mla_inputs(torch.float32, (3,), seed=2)
    inputs["cache_index"][1] = -1
    _, _, kv_out, _ = torch_npu.npu_mla_prolog(*positional(inputs, "npu"))
    torch.testing.assert_close(kv_out.cpu(), expected(inputs)[2])


def test_mla_prolog_meta():
    inputs = mla_inputs(torch.bfloat16, (2, 3))
    meta = [t.to("meta") for t in positional(inputs)]
    q, qr, kv, kr = torch.ops.npu.npu_mla_prolog(*meta)
    assert q.shape == (2, 3, N, HCKV) and qr.shape == (2, 3, N, DR) and kv.shape == inputs["kv_cache"].shape
    assert q.dtype == torch.bfloat16 and kr.shape == inputs["kr_cache"].shape
    q, qr, kv, kr, dq = torch.ops.npu.npu_mla_prolog_v2(*meta)
    assert q.shape == (2, 3, N, HCKV) and qr.dtype == torch.bfloat16 and dq.shape == (1,)


def test_mla_prolog_device_ops():
    inputs = mla_inputs(torch.float32, (2,))
    stats = torch.npu.op_stats()
    before_v1 = stats.get("aclnnMlaProlog", {}).get("device_op", 0)
    before_v2 = stats.get("aclnnMlaPrologV2WeightNz", {}).get("device_op", 0)
    torch_npu.npu_mla_prolog(*positional(inputs, "npu"))
    torch_npu.npu_mla_prolog_v2(*positional(inputs, "npu"))
    torch.npu.synchronize()
    stats = torch.npu.op_stats()
    assert stats["aclnnMlaProlog"]["device_op"] == before_v1 + 1
    assert stats["aclnnMlaPrologV2WeightNz"]["device_op"] == before_v2 + 1


def test_mla_prolog_errors():
    inputs = mla_inputs(torch.float32, (2,))
    args = positional(inputs, "npu")
    with pytest.raises(ValueError, match="cache_mode"):
        torch_npu.npu_mla_prolog(*args, cache_mode="BSND")
    with pytest.raises(ValueError, match="weight_uk must be 3-D"):
        torch_npu.npu_mla_prolog(*args[:3], args[3].flatten(1), *args[4:])
    with pytest.raises(ValueError, match="quantized prologue"):
        torch_npu.npu_mla_prolog_v2(*args, quant_scale_ckv=torch.ones(1, HCKV).npu())
    with pytest.raises(TypeError, match="token_x must be float32"):
        torch_npu.npu_mla_prolog(args[0].to(torch.int8), *args[1:])


def dense_caches(inputs, lead, dtype):
    """BSND ([B, S, Nkv, H]) or TND ([T, Nkv, H]) caches: one row per token."""
    inputs["kv_cache"] = torch.randn(*lead, NKV, HCKV).to(dtype)
    inputs["kr_cache"] = torch.randn(*lead, NKV, DR).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("lead,cache_mode", [((2, 2), "PA_BSND"), ((3,), "PA_NZ"), ((2, 2), "BSND"), ((3,), "TND")])
def test_mla_prolog_v3_in_place(dtype, lead, cache_mode):
    inputs = mla_inputs(dtype, lead, seed=3)
    if cache_mode in ("BSND", "TND"):
        dense_caches(inputs, lead, dtype)
    args = positional(inputs, "npu")
    kv, kr = args[10], args[11]
    q, qr, dq_nope, q_norm, dq_norm = torch_npu.npu_mla_prolog_v3(
        *args[:9], kv, kr, cache_index=args[9], cache_mode=cache_mode, query_norm_flag=True, qc_qr_scale=0.5,
        kc_scale=2.0)
    eq, eqr, ekv, ekr, enorm = ref.mla_prolog(*positional(inputs), cache_mode=cache_mode, qc_qr_scale=0.5,
                                              kc_scale=2.0, with_query_norm=True)
    assert q.dtype == torch.bfloat16 and qr.dtype == torch.bfloat16 and q_norm.dtype == dtype
    assert dq_nope.numel() == 0 and dq_norm.numel() == 0 and q_norm.shape == (*lead, HCQ)
    assert_close(q, eq, torch.bfloat16)
    assert_close(qr, eqr, torch.bfloat16)
    assert_close(q_norm, enorm, dtype)
    assert_close(kv, ekv, dtype)
    assert_close(kr, ekr, dtype)


def test_mla_prolog_v3_functional_keeps_inputs():
    inputs = mla_inputs(torch.bfloat16, (2, 2), seed=4)
    args = positional(inputs, "npu")
    kv_before = inputs["kv_cache"].clone()
    out = torch_npu.npu_mla_prolog_v3_functional(*args[:9], args[10], args[11], cache_index=args[9])
    assert len(out) == 7 and out[3].numel() == 0
    eq, eqr, ekv, ekr = ref.mla_prolog(*positional(inputs))
    assert_close(out[0], eq, torch.bfloat16)
    assert_close(out[1], eqr, torch.bfloat16)
    assert_close(out[5], ekv, torch.bfloat16)
    assert_close(out[6], ekr, torch.bfloat16)
    assert torch.equal(args[10].cpu(), kv_before)


def test_mla_prolog_v3_meta_device_op_and_errors():
    inputs = mla_inputs(torch.bfloat16, (3,))
    meta = [t.to("meta") for t in positional(inputs)]
    out = torch.ops.npu.npu_mla_prolog_v3_functional(*meta[:9], meta[10], meta[11], cache_index=meta[9],
                                                     query_norm_flag=True)
    assert out[0].shape == (3, N, HCKV) and out[1].shape == (3, N, DR) and out[3].shape == (3, HCQ)
    assert out[5].shape == inputs["kv_cache"].shape and out[2].numel() == 0
    q = torch.ops.npu.npu_mla_prolog_v3(*meta[:9], meta[10], meta[11], cache_index=meta[9])[0]
    assert q.shape == (3, N, HCKV) and q.dtype == torch.bfloat16

    args = positional(inputs, "npu")
    before = torch.npu.op_stats().get("aclnnMlaPrologV3WeightNz", {}).get("device_op", 0)
    torch_npu.npu_mla_prolog_v3(*args[:9], args[10], args[11], cache_index=args[9])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnMlaPrologV3WeightNz"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="unquantized"):
        torch_npu.npu_mla_prolog_v3(*args[:9], args[10], args[11], cache_index=args[9], weight_quant_mode=1)
    with pytest.raises(ValueError, match="cache_mode"):
        torch_npu.npu_mla_prolog_v3(*args[:9], args[10], args[11], cache_index=args[9], cache_mode="PA_BLK_NZ")
    with pytest.raises(TypeError, match="hifloat8"):
        torch_npu.npu_mla_prolog_v3(*args[:9], args[10], args[11], cache_index=args[9], token_x_dtype=1)


def kv_inputs(dtype, mode, seed=5, dc=32, dr=16, b=2, s=3):
    g = torch.Generator().manual_seed(seed)
    kv = torch.randn(b, 1, s, dc + dr, generator=g).to(dtype)
    gamma = (torch.randn(dc, generator=g) * 0.1 + 1).to(dtype)
    cos, sin = torch.randn(b, 1, s, dr, generator=g).to(dtype), torch.randn(b, 1, s, dr, generator=g).to(dtype)
    if mode == "Norm":
        index = torch.stack([torch.randperm(5, generator=g)[:s] for _ in range(b)])
        k_cache, c_cache = torch.randn(b, 1, 5, dr).to(dtype), torch.randn(b, 1, 5, dc).to(dtype)
    else:
        index = torch.randperm(16, generator=g)[:b * s]
        k_cache, c_cache = torch.randn(4, 4, 1, dr).to(dtype), torch.randn(4, 4, 1, dc).to(dtype)
    return kv, gamma, cos, sin, index.to(torch.int64), k_cache, c_cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mode", ["Norm", "PA_BNSD"])
@pytest.mark.parametrize("functional", [False, True])
def test_kv_rmsnorm_rope_cache_v2(dtype, mode, functional):
    kv, gamma, cos, sin, index, k_cache, c_cache = kv_inputs(dtype, mode)
    kc, cc = k_cache.npu(), c_cache.npu()
    args = (kv.npu(), gamma.npu(), cos.npu(), sin.npu(), index.npu(), kc, cc)
    if functional:
        k_rope, c_kv, kc_out, cc_out = torch_npu.npu_kv_rmsnorm_rope_cache_v2_functional(*args, cache_mode=mode,
                                                                                         is_output_kv=True)
        assert torch.equal(kc.cpu(), k_cache) and torch.equal(cc.cpu(), c_cache)  # inputs untouched
    else:
        k_rope, c_kv = torch_npu.npu_kv_rmsnorm_rope_cache_v2(*args, cache_mode=mode, is_output_kv=True)
        kc_out, cc_out = kc, cc  # updated in place
    k_rows, c_rows = ref.kv_rmsnorm_rope_rows(kv, gamma, cos, sin)
    assert k_rope.shape == k_rows.shape and c_kv.shape == c_rows.shape and k_rope.dtype == dtype
    assert_close(k_rope, k_rows, dtype)
    assert_close(c_kv, c_rows, dtype)
    assert_close(kc_out, ref.write_kv_rows(k_cache, k_rows, index, mode), dtype)
    assert_close(cc_out, ref.write_kv_rows(c_cache, c_rows, index, mode), dtype)


def test_kv_rmsnorm_rope_cache_v2_meta_device_op_and_errors():
    kv, gamma, cos, sin, index, k_cache, c_cache = kv_inputs(torch.float16, "PA_BNSD")
    meta = [t.to("meta") for t in (kv, gamma, cos, sin, index, k_cache, c_cache)]
    k_rope, c_kv, kc, cc = torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2_functional(*meta, cache_mode="PA_BNSD")
    assert k_rope.shape == (2, 1, 3, 16) and c_kv.shape == (2, 1, 3, 32) and kc.shape == k_cache.shape
    k_rope, c_kv = torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2(*meta, cache_mode="PA_BNSD")
    assert k_rope.shape == (2, 1, 3, 16) and c_kv.dtype == torch.float16
    args = [t.npu() for t in (kv, gamma, cos, sin, index, k_cache, c_cache)]
    before = torch.npu.op_stats().get("aclnnKvRmsNormRopeCache", {}).get("device_op", 0)
    torch_npu.npu_kv_rmsnorm_rope_cache_v2(*args, cache_mode="PA_BNSD")
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnKvRmsNormRopeCache"]["device_op"] == before + 1
    with pytest.raises(TypeError, match="hifloat8"):
        torch_npu.npu_kv_rmsnorm_rope_cache_v2(*args, cache_mode="PA_BNSD", k_cache_dtype=34)
    with pytest.raises(ValueError, match="4-D"):
        torch_npu.npu_kv_rmsnorm_rope_cache_v2(args[0][:, 0], *args[1:], cache_mode="PA_BNSD")


def qkv_inputs(dtype, quant, s_rope_one=False, seed=6, b=2, s=3, heads=(2, 1, 1), d=32, blocks=3, block_size=4):
    g = torch.Generator().manual_seed(seed)
    nq, nk, nv = heads
    qkv = torch.randn(b * s, (nq + nk + nv) * d, generator=g).to(dtype)
    q_gamma, k_gamma = torch.randn(d, generator=g).to(dtype), torch.randn(d, generator=g).to(dtype)
    rope_rows = b if s_rope_one else b * s
    cos, sin = torch.randn(rope_rows, d, generator=g).to(dtype), torch.randn(rope_rows, d, generator=g).to(dtype)
    slots = torch.randperm(blocks * block_size, generator=g)[:b * s]
    slots[1] = -1  # a padding token
    c0 = 32 if quant else 16
    cache_dtype = torch.int8 if quant else dtype
    k_cache = torch.zeros(blocks, nk * d // c0, block_size, c0, dtype=cache_dtype)
    v_cache = torch.zeros(blocks, nv * d // c0, block_size, c0, dtype=cache_dtype)
    q_out = torch.zeros(b * s, nq * d, dtype=dtype)
    scales = dict(k_scale=torch.rand(nk, d, generator=g) * 0.05 + 0.01,
                  v_scale=torch.rand(nv, d, generator=g) * 0.05 + 0.01) if quant else {}
    return (qkv, q_gamma, k_gamma, cos, sin, slots.to(torch.int64), q_out, k_cache, v_cache, [b, s, sum(heads), d],
            list(heads)), scales


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("quant", [False, True])
@pytest.mark.parametrize("functional", [False, True])
def test_qkv_rms_norm_rope_cache(dtype, quant, functional):
    args, scales = qkv_inputs(dtype, quant, s_rope_one=functional)
    dev = [a.npu() if isinstance(a, torch.Tensor) else a for a in args]
    dev_scales = {n: t.npu() for n, t in scales.items()}
    expect = ref.qkv_rms_norm_rope_cache(*args, **scales)
    if functional:
        out = torch_npu.npu_qkv_rms_norm_rope_cache_functional(*dev, **dev_scales, is_output_qkv=True)
        befores, updated = out[:3], out[3:]
        assert torch.equal(dev[7].cpu(), args[7])  # the input cache is untouched
    else:
        befores = torch_npu.npu_qkv_rms_norm_rope_cache(*dev, **dev_scales, is_output_qkv=True)
        updated = (dev[6], dev[7], dev[8])
    assert_close(updated[0], expect[0], dtype)
    for got, want in zip(updated[1:], expect[1:3]):
        if quant:  # int8 caches: one step of rounding difference at most
            assert (got.cpu().int() - want.int()).abs().max() <= 1
        else:
            assert_close(got, want, dtype)
    for got, want in zip(befores, expect[3:]):
        assert got.dtype == dtype
        assert_close(got, want, dtype)


def test_qkv_rms_norm_rope_cache_meta_device_op_and_errors():
    args, _ = qkv_inputs(torch.float16, False)
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    q_b, k_b, v_b = torch.ops.npu.npu_qkv_rms_norm_rope_cache(*meta, is_output_qkv=True)
    assert q_b.shape == (6, 64) and k_b.shape == (6, 32) and v_b.dtype == torch.float16
    out = torch.ops.npu.npu_qkv_rms_norm_rope_cache_functional(*meta)
    assert out[0].numel() == 0 and out[4].shape == args[7].shape
    dev = [a.npu() if isinstance(a, torch.Tensor) else a for a in args]
    before = torch.npu.op_stats().get("aclnnQkvRmsNormRopeCache", {}).get("device_op", 0)
    torch_npu.npu_qkv_rms_norm_rope_cache(*dev)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnQkvRmsNormRopeCache"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="cache_mode must be PA_NZ"):
        torch_npu.npu_qkv_rms_norm_rope_cache(*dev, cache_mode="PA_BNSD")
    with pytest.raises(ValueError, match="qkv must be 2-D"):
        torch_npu.npu_qkv_rms_norm_rope_cache(*dev[:9], [2, 3, 4, 16], dev[10])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8])
@pytest.mark.parametrize("slot_dtype", [torch.int32, torch.int64])
def test_scatter_pa_cache(dtype, slot_dtype):
    g = torch.Generator().manual_seed(7)
    key = (torch.randn(6, 2, 8, generator=g) * 20).to(dtype)
    cache = (torch.randn(3, 4, 2, 8, generator=g) * 20).to(dtype)
    slots = torch.randperm(12, generator=g)[:6].to(slot_dtype)
    slots[2] = -1
    cache_npu = cache.npu()
    out = torch_npu.npu_scatter_pa_cache(key.npu(), slots.npu(), key_cache=cache_npu)
    expect = ref.scatter_pa_cache(key, slots, cache)
    assert torch.equal(cache_npu.cpu(), expect)  # updated in place
    assert torch.equal(out.cpu(), expect)


def test_scatter_pa_cache_meta_device_op_and_errors():
    key, cache, slots = torch.randn(3, 1, 4), torch.zeros(2, 2, 1, 4), torch.tensor([0, 3, 1])
    out = torch.ops.npu.npu_scatter_pa_cache.value(key.to("meta"), slots.to("meta"), key_cache=cache.to("meta"))
    assert out.shape == cache.shape
    before = torch.npu.op_stats().get("aclnnScatterPaCache", {}).get("device_op", 0)
    torch_npu.npu_scatter_pa_cache(key.npu(), slots.npu(), key_cache=cache.npu())
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnScatterPaCache"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="compressed form"):
        torch_npu.npu_scatter_pa_cache(key.npu(), slots.npu(), seq_lens=slots.npu(), key_cache=cache.npu())
    with pytest.raises(TypeError, match="one dtype"):
        torch_npu.npu_scatter_pa_cache(key.half().npu(), slots.npu(), key_cache=cache.npu())


def rope_quant_inputs(dtype, cache_mode, dequant=False, seed=8, b=2, s=3, nq=2, nkv=1, d=16):
    g = torch.Generator().manual_seed(seed)
    width = (nq + 2 * nkv) * d
    if dequant:
        x = torch.randint(-200, 200, (b, s, width), generator=g, dtype=torch.int32)
    else:
        x = torch.randn(b, s, width, generator=g).to(dtype)
    cos, sin = torch.randn(b, s, 1, d, generator=g).to(dtype), torch.randn(b, s, 1, d, generator=g).to(dtype)
    if cache_mode == "contiguous":
        k_cache = torch.randint(-5, 5, (b, 6, nkv, d), generator=g, dtype=torch.int8)
        indices = torch.tensor([0, 2], dtype=torch.int32)
    else:
        k_cache = torch.randint(-5, 5, (3, 4, nkv, d), generator=g, dtype=torch.int8)
        indices = torch.randperm(12, generator=g)[:b * s].to(torch.int32)
        indices[3] = -1
    v_cache = k_cache.clone()
    scale_k = torch.rand(d, generator=g) * 20 + 5
    scale_v = torch.rand(nkv * d, generator=g) * 20 + 5
    offset_k = torch.randn(d, generator=g)
    extra = {}
    if dequant:
        extra = dict(weight_scale=torch.rand(width, generator=g) * 0.01,
                     activation_scale=torch.rand(b * s, generator=g) + 0.5,
                     bias=torch.randint(-10, 10, (width,), generator=g, dtype=torch.int32))
    return (x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, [nq * d, nkv * d, nkv * d]), \
        dict(offset_k=offset_k), extra


def check_rope_quant(out, expect, dtype, kv_output):
    q, k, v, kc, vc = out
    assert q.dtype == dtype
    assert_close(q, expect[0], dtype)
    if kv_output:
        assert_close(k, expect[1], dtype)
        assert_close(v, expect[2], dtype)
    else:
        assert k.numel() == 0 and v.numel() == 0
    for got, want in ((kc, expect[3]), (vc, expect[4])):  # int8: at most one rounding step apart
        assert (got.cpu().int() - want.int()).abs().max() <= 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cache_mode", ["contiguous", "page"])
@pytest.mark.parametrize("kv_output", [False, True])
def test_rope_quant_kvcache(dtype, cache_mode, kv_output):
    args, kw, _ = rope_quant_inputs(dtype, cache_mode)
    dev = [a.npu() if isinstance(a, torch.Tensor) else a for a in args]
    out = torch_npu.npu_rope_quant_kvcache(*dev, **{n: t.npu() for n, t in kw.items()}, kv_output=kv_output,
                                           cache_mode=cache_mode)
    expect = ref.rope_quant_kvcache(*args, **kw, cache_mode=cache_mode)
    check_rope_quant(out, expect, dtype, kv_output)
    assert (dev[3].cpu().int() - expect[3].int()).abs().max() <= 1  # the cache passed in is updated in place


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("cache_mode", ["contiguous", "page"])
def test_dequant_rope_quant_kvcache(dtype, cache_mode):
    args, kw, extra = rope_quant_inputs(dtype, cache_mode, dequant=True)
    dev = [a.npu() if isinstance(a, torch.Tensor) else a for a in args]
    out = torch_npu.npu_dequant_rope_quant_kvcache(*dev, **{n: t.npu() for n, t in {**kw, **extra}.items()},
                                                   kv_output=True, cache_mode=cache_mode)
    expect = ref.rope_quant_kvcache(*args, **kw, **extra, cache_mode=cache_mode)
    check_rope_quant(out, expect, dtype, True)


def test_rope_quant_kvcache_meta_device_op_and_errors():
    args, kw, _ = rope_quant_inputs(torch.float16, "contiguous")
    meta = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
    q, k, v, kc, vc = torch.ops.npu.npu_rope_quant_kvcache(*meta, kv_output=True)
    assert q.shape == (2, 3, 2, 16) and k.shape == (2, 3, 1, 16) and kc.shape == args[3].shape
    dev = [a.npu() if isinstance(a, torch.Tensor) else a for a in args]
    before = torch.npu.op_stats().get("aclnnDequantRopeQuantKvcache", {}).get("device_op", 0)
    torch_npu.npu_rope_quant_kvcache(*dev)
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDequantRopeQuantKvcache"]["device_op"] == before + 1
    with pytest.raises(ValueError, match="quant_mode"):
        torch_npu.npu_rope_quant_kvcache(*dev, quant_mode=1)
    with pytest.raises(TypeError, match="int32"):
        torch_npu.npu_dequant_rope_quant_kvcache(*dev, weight_scale=torch.ones(64).npu())

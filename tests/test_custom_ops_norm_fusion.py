"""Norm fusions on their device ops: npu_add_rms_norm_cast, npu_add_rms_norm_v2 (in place and functional),
npu_add_layer_norm and npu_deep_norm (with gradients), npu_layer_norm_eval, npu_group_norm_silu and
npu_group_norm_swish (with gradients), against CPU references written from the documented formulas, in float32 /
float16 / bfloat16; Meta shapes, device op names and argument errors."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu
from op_refs import misc_ops as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def check(actual, expected, dtype=torch.float32):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(actual.detach().cpu().float(), expected.detach().cpu().float(), rtol=rtol, atol=atol)


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def assert_launches(name, fn):
    before = device_op_count(name)
    fn()
    torch.npu.synchronize()
    assert device_op_count(name) == before + 1, name


def leaves(tensors, device):
    return [t.detach().to(device).requires_grad_(True) for t in tensors]


# --- npu_add_rms_norm_cast ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gamma_shape", [(32,), (5, 32)])
def test_add_rms_norm_cast(dtype, gamma_shape):
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(3, 5, 32, generator=g).to(dtype), torch.randn(3, 5, 32, generator=g).to(dtype)
    gamma = (torch.rand(gamma_shape, generator=g) + 0.5).to(dtype)
    y1, y2, rstd, x = torch_npu.npu_add_rms_norm_cast(x1.npu(), x2.npu(), gamma.npu(), 1e-5)
    e1, e2, erstd, ex = ref.add_rms_norm_cast(x1, x2, gamma, 1e-5)
    assert (y1.dtype, y2.dtype, rstd.dtype, x.dtype) == (torch.float32, dtype, torch.float32, dtype)
    assert rstd.shape == erstd.shape
    check(x, ex, dtype)
    check(y1, e1, dtype)
    check(y2, e2, dtype)
    check(rstd, erstd, dtype)


def test_add_rms_norm_cast_meta_device_op_and_errors():
    x = torch.empty(2, 4, 16, dtype=torch.float16, device="meta")
    y1, y2, rstd, s = torch.ops.npu.npu_add_rms_norm_cast(x, x, torch.empty(16, dtype=torch.float16, device="meta"))
    assert (y1.dtype, y2.dtype, rstd.shape, s.shape) == (torch.float32, torch.float16, (2, 4, 1), (2, 4, 16))
    a = torch.randn(2, 16).half().npu()
    assert_launches("aclnnAddRmsNormCast", lambda: torch_npu.npu_add_rms_norm_cast(a, a, torch.ones(16).half().npu()))
    with pytest.raises(ValueError, match="trailing dimensions"):
        torch_npu.npu_add_rms_norm_cast(a, a, torch.ones(8).half().npu())
    with pytest.raises(ValueError, match="one shape"):
        torch_npu.npu_add_rms_norm_cast(a, torch.randn(3, 16).half().npu(), torch.ones(16).half().npu())


# --- npu_add_rms_norm_v2 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rms_norm_v2_in_place_and_functional(dtype):
    g = torch.Generator().manual_seed(1)
    x1, x2 = torch.randn(4, 64, generator=g).to(dtype), torch.randn(4, 64, generator=g).to(dtype)
    gamma = (torch.rand(64, generator=g) + 0.5).to(dtype)
    _, y_ref, rstd_ref, x_ref = ref.add_rms_norm_cast(x1, x2, gamma)
    a, b = x1.npu(), x2.npu()
    rstd, y, x = torch_npu.npu_add_rms_norm_v2_functional(a, b, gamma.npu())
    assert rstd.dtype == torch.float32 and rstd.shape == (4, 1) and y.dtype == dtype
    check(rstd, rstd_ref, dtype)
    check(y, y_ref, dtype)
    check(x, x_ref, dtype)
    assert torch.equal(a.cpu(), x1) and torch.equal(b.cpu(), x2)  # the functional form leaves its inputs alone
    rstd = torch_npu.npu_add_rms_norm_v2(a, b, gamma.npu())
    check(rstd, rstd_ref, dtype)
    check(a, y_ref, dtype)  # x1 now holds the normalised output ...
    check(b, x_ref, dtype)  # ... and x2 the residual sum


def test_add_rms_norm_v2_meta_device_op_and_errors():
    m = torch.empty(3, 8, device="meta")
    assert torch.ops.npu.npu_add_rms_norm_v2(m, m.clone(), torch.empty(8, device="meta")).shape == (3, 1)
    r, y, x = torch.ops.npu.npu_add_rms_norm_v2_functional(m, m, torch.empty(8, device="meta"))
    assert (r.shape, y.shape, x.shape) == ((3, 1), (3, 8), (3, 8))
    a, b = torch.randn(3, 8).npu(), torch.randn(3, 8).npu()
    assert_launches("aclnnInplaceAddRmsNorm", lambda: torch_npu.npu_add_rms_norm_v2(a, b, torch.ones(8).npu()))
    with pytest.raises(TypeError, match="one dtype"):
        torch_npu.npu_add_rms_norm_v2(a, b.half(), torch.ones(8).npu())


# --- npu_add_layer_norm ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_add_layer_norm_forward(dtype):
    g = torch.Generator().manual_seed(2)
    x1, x2 = torch.randn(2, 6, 48, generator=g).to(dtype), torch.randn(2, 6, 48, generator=g).to(dtype)
    gamma, beta = torch.rand(48, generator=g).to(dtype), torch.randn(48, generator=g).to(dtype)
    y, mean, rstd, x = torch_npu.npu_add_layer_norm(x1.npu(), x2.npu(), gamma.npu(), beta.npu(), 1e-5, True)
    ey, emean, erstd, ex = ref.add_layer_norm(x1, x2, gamma, beta, 1e-5)
    assert (y.dtype, x.dtype, mean.dtype, rstd.dtype) == (dtype, dtype, torch.float32, torch.float32)
    assert mean.shape == rstd.shape == (2, 6, 1)
    check(y, ey, dtype)
    check(x, ex, dtype)
    check(mean, emean, dtype)
    check(rstd, erstd, dtype)


def test_add_layer_norm_mixed_dtypes_give_float32():
    # torch_npu's case: float16 x1 with a float32 residual; y and x come out float32.
    g = torch.Generator().manual_seed(3)
    x1, x2 = (torch.rand(1, 16, 64, generator=g) * 100).half(), torch.rand(1, 16, 64, generator=g) * 100
    gamma, beta = torch.rand(64, generator=g), torch.rand(64, generator=g)
    y, mean, rstd, x = torch_npu.npu_add_layer_norm(x1.npu(), x2.npu(), gamma.npu(), beta.npu(), 1e-5, True)
    ey, emean, erstd, ex = ref.add_layer_norm(x1, x2, gamma, beta)
    assert y.dtype == torch.float32 and x.dtype == torch.float32
    check(y, ey)
    check(x, ex)
    check(mean, emean)
    check(rstd, erstd)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_add_layer_norm_gradients(dtype):
    g = torch.Generator().manual_seed(4)
    inputs = [torch.randn(3, 4, 32, generator=g), torch.randn(3, 4, 32, generator=g),
              torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)]
    inputs = [t.to(dtype) for t in inputs]
    dy, dsum = torch.randn(3, 4, 32, generator=g), torch.randn(3, 4, 32, generator=g)

    def run(fn, device):
        xs = leaves([t.float() if device == "cpu" else t for t in inputs], device)
        y, _, _, x = fn(*xs)
        # The returned residual sum x carries a gradient too (its dsum).
        ((y.float() * dy.to(device)).sum() + (x.float() * dsum.to(device)).sum()).backward()
        return [t.grad for t in xs]

    expected = run(lambda *a: ref.add_layer_norm(*a), "cpu")
    actual = run(lambda *a: torch_npu.npu_add_layer_norm(*a, 1e-5, True), "npu")
    tol = dtype if dtype == torch.float32 else torch.bfloat16  # float16 inputs: gradients rounded twice
    for a, e in zip(actual, expected):
        check(a, e, tol)


def test_add_layer_norm_backward_op_and_meta():
    x1, x2 = torch.randn(2, 16).npu(), torch.randn(2, 16).npu()
    gamma, beta = torch.rand(16).npu(), torch.randn(16).npu()
    _, mean, rstd, _ = torch_npu.npu_add_layer_norm(x1, x2, gamma, beta)
    dy = torch.randn(2, 16).npu()
    dx1, dx2, dgamma, dbeta = torch_npu.npu_add_layer_norm_backward(dy, x1, x2, rstd, mean, gamma, None)
    assert torch.equal(dx1.cpu(), dx2.cpu()) and dx1.data_ptr() != dx2.data_ptr()
    assert dgamma.dtype == dbeta.dtype == torch.float32
    check(dbeta, dy.cpu().sum(0))
    # No dy at all: only dsum flows back.
    dsum = torch.randn(2, 16).npu()
    dx1, _, _, _ = torch_npu.npu_add_layer_norm_backward(None, x1, x2, rstd, mean, gamma, dsum)
    check(dx1, dsum)
    m = torch.empty(2, 5, 16, device="meta")
    outs = torch.ops.npu.npu_add_layer_norm(m, m, torch.empty(16, device="meta"), torch.empty(16, device="meta"))
    assert [tuple(o.shape) for o in outs] == [(2, 5, 16), (2, 5, 1), (2, 5, 1), (2, 5, 16)]
    assert_launches("aclnnAddLayerNorm", lambda: torch_npu.npu_add_layer_norm(x1, x2, gamma, beta))
    assert_launches("aclnnAddLayerNormGrad",
                    lambda: torch_npu.npu_add_layer_norm_backward(dy, x1, x2, rstd, mean, gamma, None))
    with pytest.raises(ValueError, match="beta"):
        torch_npu.npu_add_layer_norm(x1, x2, gamma, torch.randn(8).npu())


# --- npu_deep_norm -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_deep_norm_forward(dtype):
    g = torch.Generator().manual_seed(5)
    x, gx = torch.randn(4, 2, 64, generator=g).to(dtype), torch.randn(4, 2, 64, generator=g).to(dtype)
    beta, gamma = torch.randn(2, 64, generator=g).to(dtype), torch.rand(2, 64, generator=g).to(dtype)
    mean, rstd, y = torch_npu.npu_deep_norm(x.npu(), gx.npu(), beta.npu(), gamma.npu(), 0.3, 1e-6)
    emean, erstd, ey = ref.deep_norm(x, gx, beta, gamma, 0.3, 1e-6)
    assert mean.dtype == rstd.dtype == torch.float32 and mean.shape == (4, 1, 1) and y.dtype == dtype
    check(mean, emean, dtype)
    check(rstd, erstd, dtype)
    check(y, ey, dtype)


@pytest.mark.parametrize("alpha", [0.3, 0.87])
def test_deep_norm_gradients(alpha):
    g = torch.Generator().manual_seed(6)
    inputs = [torch.rand(6, 128, generator=g), torch.rand(6, 128, generator=g), torch.rand(128, generator=g),
              torch.rand(128, generator=g)]  # x, gx, beta, gamma as torch_npu's own test draws them
    dy = torch.rand(6, 128, generator=g)
    grads = []
    for fn, device in ((lambda *a: ref.deep_norm(*a, alpha, 1e-6)[2], "cpu"),
                       (lambda *a: torch_npu.npu_deep_norm(*a, alpha, 1e-6)[2], "npu")):
        xs = leaves(inputs, device)
        fn(*xs).backward(dy.to(device))
        grads.append([t.grad for t in xs])
    expected, actual = grads
    for a, e in zip(actual, expected):
        check(a, e)
    # The backward op itself: (dx, dgx, dbeta, dgamma).
    x, gx, beta, gamma = (t.npu() for t in inputs)
    mean, rstd, _ = torch_npu.npu_deep_norm(x, gx, beta, gamma, alpha)
    dx, dgx, dbeta, dgamma = torch_npu.npu_deep_norm_backward(dy.npu(), x, gx, gamma, mean, rstd, alpha)
    assert dbeta.dtype == dgamma.dtype == torch.float32 and dbeta.shape == (128,)
    for a, e in zip((dx, dgx, dbeta, dgamma), expected):
        check(a, e)


def test_deep_norm_meta_device_ops_and_errors():
    m = torch.empty(3, 4, 8, dtype=torch.float16, device="meta")
    p = torch.empty(4, 8, dtype=torch.float16, device="meta")
    mean, rstd, y = torch.ops.npu.npu_deep_norm(m, m, p, p)
    assert mean.shape == (3, 1, 1) and mean.dtype == torch.float32 and y.dtype == torch.float16
    x = torch.randn(2, 8).npu()
    assert_launches("aclnnDeepNorm", lambda: torch_npu.npu_deep_norm(x, x, torch.zeros(8).npu(), torch.ones(8).npu()))
    mean, rstd, _ = torch_npu.npu_deep_norm(x, x, torch.zeros(8).npu(), torch.ones(8).npu())
    assert_launches("aclnnDeepNormGrad",
                    lambda: torch_npu.npu_deep_norm_backward(x, x, x, torch.ones(8).npu(), mean, rstd))
    with pytest.raises(ValueError, match="trailing dimensions"):
        torch_npu.npu_deep_norm(x, x, torch.zeros(4).npu(), torch.ones(4).npu())


# --- npu_layer_norm_eval -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_eval(dtype):
    g = torch.Generator().manual_seed(7)
    x = torch.rand(6, 4, 10, generator=g).to(dtype)
    w, b = torch.randn(4, 10, generator=g).to(dtype), torch.randn(4, 10, generator=g).to(dtype)
    for kwargs in ({}, {"weight": w}, {"weight": w, "bias": b}, {"bias": b}):
        out = torch_npu.npu_layer_norm_eval(x.npu(), x.shape[1:], **{k: v.npu() for k, v in kwargs.items()})
        params = {k: v.float() for k, v in kwargs.items()}
        expect = F.layer_norm(x.float(), (4, 10), params.get("weight"), params.get("bias"), eps=1e-5)
        assert out.dtype == dtype
        check(out, expect, dtype)
    # Float32 parameters with a float16 input.
    out = torch_npu.npu_layer_norm_eval(x.half().npu(), [10], torch.ones(10).npu(), torch.zeros(10).npu(), 1e-3)
    check(out, F.layer_norm(x.half().float(), (10,), eps=1e-3), torch.float16)


def test_layer_norm_eval_meta_device_op_and_errors():
    assert torch.ops.npu.npu_layer_norm_eval(torch.empty(3, 5, device="meta"), [5]).shape == (3, 5)
    x = torch.rand(6, 4).npu()
    assert_launches("aclnnLayerNorm", lambda: torch_npu.npu_layer_norm_eval(x, [4]))
    with pytest.raises(ValueError, match="trailing shape"):
        torch_npu.npu_layer_norm_eval(x, [6])
    with pytest.raises(ValueError, match="weight and bias"):
        torch_npu.npu_layer_norm_eval(x, [4], torch.ones(3).npu())
    with pytest.raises(TypeError, match="floating-point"):
        torch_npu.npu_layer_norm_eval(torch.ones(6, 4, dtype=torch.int32).npu(), [4])


# --- npu_group_norm_silu -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm_silu(dtype):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(3, 8, 5, 4, generator=g).to(dtype)
    w, b = torch.randn(8, generator=g).to(dtype), torch.randn(8, generator=g).to(dtype)
    for weight, bias, groups in ((w, b, 4), (None, None, 2), (w, None, 8)):
        out, mean, rstd = torch_npu.npu_group_norm_silu(x.npu(), None if weight is None else weight.npu(),
                                                        None if bias is None else bias.npu(), groups, 1e-4)
        eout, emean, erstd = ref.group_norm_silu(x, weight, bias, groups, 1e-4)
        assert out.dtype == mean.dtype == rstd.dtype == dtype and mean.shape == (3, groups)
        check(out, eout, dtype)
        check(mean, emean, dtype)
        check(rstd, erstd, dtype)


def test_group_norm_silu_matches_aten_group_norm_on_npu():
    # torch_npu's own golden: aten::native_group_norm then silu, here on a 3-D input.
    x, w, b = torch.randn(2, 6, 7).npu(), torch.randn(6).npu(), torch.randn(6).npu()
    out, mean, rstd = torch_npu.npu_group_norm_silu(x, w, b, 3, 1e-5)
    gout, gmean, grstd = torch.ops.aten.native_group_norm(x, w, b, 2, 6, 7, 3, 1e-5)
    check(out, F.silu(gout))
    check(mean, gmean)
    check(rstd, grstd)


def test_group_norm_silu_meta_device_op_and_errors():
    outs = torch.ops.npu.npu_group_norm_silu(torch.empty(2, 6, 3, device="meta"), None, None, 3)
    assert [tuple(o.shape) for o in outs] == [(2, 6, 3), (2, 3), (2, 3)]
    x = torch.randn(2, 6, 3).npu()
    assert_launches("aclnnGroupNormSilu", lambda: torch_npu.npu_group_norm_silu(x, None, None, 2))
    with pytest.raises(ValueError, match="equal groups"):
        torch_npu.npu_group_norm_silu(x, None, None, 4)
    with pytest.raises(ValueError, match="one value per channel"):
        torch_npu.npu_group_norm_silu(x, torch.ones(3).npu(), None, 3)


# --- npu_group_norm_swish ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,groups,scale", [((3, 3), 3, 1.0), ((3, 6, 7, 2), 6, 1.0), ((24, 35, 76), 35, 1.0),
                                                ((2, 8, 5, 3), 4, 0.6), ((4, 12, 10), 1, 1.7)])
def test_group_norm_swish_forward_and_gradients(shape, groups, scale):
    # The first three are torch_npu's own cases (num_groups = C, all-ones output gradient).
    g = torch.Generator().manual_seed(9)
    c = shape[1]
    inputs = [torch.randn(shape, generator=g), torch.randn(c, generator=g), torch.randn(c, generator=g)]
    dout = torch.randn(shape, generator=g)
    results = []
    for fn, device in ((lambda x, w, b: ref.group_norm_swish(x, groups, w, b, 1e-5, scale), "cpu"),
                       (lambda x, w, b: torch_npu.npu_group_norm_swish(x, groups, w, b, eps=1e-5,
                                                                       swish_scale=scale), "npu")):
        xs = leaves(inputs, device)
        out, mean, rstd = fn(*xs)
        out.backward(dout.to(device))
        results.append((out, mean, rstd, *[t.grad for t in xs]))
    expected, actual = results
    assert actual[1].shape == (shape[0], groups) and not actual[1].requires_grad
    for a, e in zip(actual, expected):
        check(a, e)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_group_norm_swish_reduced_precision(dtype):
    g = torch.Generator().manual_seed(10)
    x = torch.randn(2, 8, 6, generator=g).to(dtype)
    w, b = torch.randn(8, generator=g).to(dtype), torch.randn(8, generator=g).to(dtype)
    out, mean, rstd = torch_npu.npu_group_norm_swish(x.npu(), 4, w.npu(), b.npu())
    eout, emean, erstd = ref.group_norm_swish(x, 4, w, b)
    assert out.dtype == mean.dtype == dtype
    check(out, eout, dtype)
    check(mean, emean, dtype)
    check(rstd, erstd, dtype)


def test_group_norm_swish_grad_op_meta_and_errors():
    x, w, b = torch.randn(2, 4, 5).npu(), torch.randn(4).npu(), torch.randn(4).npu()
    _, mean, rstd = torch_npu.npu_group_norm_swish(x, 2, w, b)
    dy = torch.randn(2, 4, 5).npu()
    dx, dw, db = torch_npu.npu_group_norm_swish_grad(dy, x, 2, w, b, mean, rstd, [True, False, True])
    assert torch.count_nonzero(dw.cpu()) == 0 and torch.count_nonzero(db.cpu()) > 0  # dweight not wanted
    leaf = [t.cpu().requires_grad_(True) for t in (x, w, b)]
    ref.group_norm_swish(leaf[0], 2, leaf[1], leaf[2])[0].backward(dy.cpu())
    check(dx, leaf[0].grad)
    check(db, leaf[2].grad)
    outs = torch.ops.npu.npu_group_norm_swish(torch.empty(2, 4, 5, device="meta"), 2,
                                              torch.empty(4, device="meta"), torch.empty(4, device="meta"))
    assert [tuple(o.shape) for o in outs] == [(2, 4, 5), (2, 2), (2, 2)]
    assert_launches("aclnnGroupNormSwish", lambda: torch_npu.npu_group_norm_swish(x, 2, w, b))
    assert_launches("aclnnGroupNormSwishGrad",
                    lambda: torch_npu.npu_group_norm_swish_grad(dy, x, 2, w, b, mean, rstd, [True, True, True]))
    with pytest.raises(ValueError, match="equal groups"):
        torch_npu.npu_group_norm_swish(x, 3, w, b)

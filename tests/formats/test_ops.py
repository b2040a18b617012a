"""Ops on tensors of any format match the CPU: named device ops, the generic executor, copies, item,
printing and comparisons; padding lanes never leak; with allow_internal_format the hot ops keep
their formats as an NPU does, and TransData launches show where formats change."""

import copy

import pytest
import torch
import torch.nn.functional as F

import torch_npu

from .reference import (FRACTAL_NZ, FRACTAL_Z, NC1HWC0, NCHW, ND, internal_format, random_tensor,
                        transdata_count)

FORMATS_4D = [NCHW, NC1HWC0, FRACTAL_Z, FRACTAL_NZ]


def npu(x, fmt):
    return torch_npu.npu_format_cast(x.npu(), fmt)


def close(a, b, **kw):
    torch.testing.assert_close(a.cpu(), b, **kw)


@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize("fa", FORMATS_4D)
@pytest.mark.parametrize("fb", FORMATS_4D)
def test_binary_ops_over_mixed_formats(allow, fa, fb):
    a, b = torch.randn(2, 17, 3, 5), torch.randn(2, 17, 3, 5) + 3
    with internal_format(allow):
        x, y = npu(a, fa), npu(b, fb)
        for op in (torch.add, torch.sub, torch.mul, torch.div, torch.maximum):
            close(op(x, y), op(a, b))
        close(x + 2.5, a + 2.5)
        close(x * y[0, :, :1], a * b[0, :, :1])  # broadcasting against a view
        close((x > y).int(), (a > b).int())
        assert torch.equal(x == y, (a == b).npu())


@pytest.mark.parametrize("fmt", [NC1HWC0, FRACTAL_Z, FRACTAL_NZ])
def test_unary_reductions_and_generic_ops(fmt):
    a = torch.randn(3, 18, 4, 5)
    x = npu(a, fmt)
    close(torch.exp(x), torch.exp(a))
    close(torch.relu(x), torch.relu(a))
    close(x.sum(), a.sum(), rtol=1e-5, atol=1e-4)
    close(x.mean(dim=(0, 2)), a.mean(dim=(0, 2)), rtol=1e-5, atol=1e-5)
    close(x.amax(dim=1), a.amax(dim=1))
    close(torch.cumsum(x, 1), torch.cumsum(a, 1), rtol=1e-5, atol=1e-5)  # generic executor
    close(torch.sort(x, dim=-1).values, torch.sort(a, dim=-1).values)
    close(torch.softmax(x, 1), torch.softmax(a, 1))
    close(x.index_select(1, torch.tensor([0, 17, 3]).npu()), a.index_select(1, torch.tensor([0, 17, 3])))
    close(torch.cat([x, x], 1), torch.cat([a, a], 1))
    close(x.to(torch.float16), a.to(torch.float16))
    assert torch.equal(x, a.npu()) and not torch.equal(x, (a + 1).npu())
    assert x[1, 17, 2, 3].item() == a[1, 17, 2, 3].item()


def test_padding_lanes_never_reach_results():
    # Elementwise ops over a shared layout compute the padding lanes too (0 / 0 = NaN there);
    # every read of the values skips them.
    a, b = torch.rand(2, 3, 5, 7) + 1, torch.rand(2, 3, 5, 7) + 1
    for allow in (False, True):
        with internal_format(allow):
            x, y = npu(a, NC1HWC0), npu(b, NC1HWC0)
            q = x / y
            e = (q - 1).exp()
            close(e.sum(), ((a / b) - 1).exp().sum(), rtol=1e-5, atol=1e-5)
            assert not torch.isnan(q).any().item()
            close(torch_npu.npu_format_cast(e, FRACTAL_NZ), ((a / b) - 1).exp())


def test_in_place_and_out_into_formatted_tensors():
    a, b = torch.randn(4, 20, 3, 3), torch.randn(4, 20, 3, 3)
    for allow in (False, True):
        with internal_format(allow):
            x = npu(a, NC1HWC0)
            x.add_(npu(b, FRACTAL_Z)).mul_(2).relu_()
            assert torch_npu.get_npu_format(x) == NC1HWC0
            close(x, ((a + b) * 2).relu())
            out = npu(torch.zeros(4, 20, 3, 3), FRACTAL_NZ)
            torch.add(a.npu(), b.npu(), out=out)
            assert torch_npu.get_npu_format(out) == FRACTAL_NZ
            close(out, a + b)
            torch.cumsum(a.npu(), 1, out=out)  # generic executor into a formatted out=
            close(out, torch.cumsum(a, 1), rtol=1e-5, atol=1e-5)
            out.fill_(1.5)
            close(out, torch.full_like(a, 1.5))
            out.zero_()
            close(out, torch.zeros_like(a))
            out.copy_(a)
            close(out, a)
            out.uniform_()
            assert out.min().item() >= 0 and out.max().item() < 1


def test_printing_and_host_copies_see_logical_values():
    a = torch.arange(40.0).view(2, 20)
    x = npu(a, FRACTAL_NZ)
    assert "39." in str(x) and "npu:0" in str(x)
    assert x.tolist() == a.tolist()
    pinned = torch.empty(2, 20).pin_memory()
    pinned.copy_(x, non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(pinned, a)
    assert torch.equal(x.to("npu:1").cpu(), a)


def test_matmul_linear_conv_and_batch_norm_in_private_formats():
    torch.manual_seed(0)
    a, w, bias = torch.randn(24, 40), torch.randn(33, 40), torch.randn(33)
    img, k = torch.randn(2, 5, 9, 9), torch.randn(7, 5, 3, 3)
    for allow in (False, True):
        with internal_format(allow):
            close(F.linear(npu(a, FRACTAL_NZ), npu(w, FRACTAL_NZ), bias.npu()), F.linear(a, w, bias),
                  rtol=1e-4, atol=1e-4)
            close(torch.mm(npu(a, FRACTAL_NZ), w.t().npu()), a @ w.t(), rtol=1e-4, atol=1e-4)
            b2 = torch.randn(2, 40, 33)
            close(torch.bmm(npu(a.view(2, 12, 40), FRACTAL_NZ), npu(b2, ND)), torch.bmm(a.view(2, 12, 40), b2),
                  rtol=1e-4, atol=1e-4)
            y = F.conv2d(npu(img, NC1HWC0), npu(k, FRACTAL_Z), padding=1)
            close(y, F.conv2d(img, k, padding=1), rtol=1e-4, atol=1e-4)
            rm, rv = torch.zeros(7), torch.ones(7)
            rm_n, rv_n = rm.npu(), rv.npu()
            ref = F.batch_norm(F.conv2d(img, k, padding=1), rm, rv, training=True)
            close(F.batch_norm(y, rm_n, rv_n, training=True), ref, rtol=1e-4, atol=1e-4)
            close(rm_n, rm, rtol=1e-4, atol=1e-5)


def test_hot_ops_keep_their_formats_with_allow_internal_format():
    img, k = torch.randn(2, 5, 8, 8), torch.randn(6, 5, 3, 3)
    with internal_format(True):
        x = img.npu()
        weight = npu(k, FRACTAL_Z)  # cast once, as seed 003's tuning does for conv weights
        torch.npu.op_stats(reset=True)
        y = F.conv2d(x, weight, padding=1)
        assert torch_npu.get_npu_format(y) == NC1HWC0
        assert transdata_count() == 1  # the plain input only
        bn = F.batch_norm(y, torch.zeros(6).npu(), torch.ones(6).npu(), training=True)
        z = torch.relu(bn) + bn
        assert torch_npu.get_npu_format(bn) == NC1HWC0 and torch_npu.get_npu_format(z) == NC1HWC0
        assert transdata_count() == 1  # conv -> batch norm -> relu -> add stays NC1HWC0
        ref_bn = F.batch_norm(F.conv2d(img, k, padding=1), torch.zeros(6), torch.ones(6), training=True)
        close(z, torch.relu(ref_bn) + ref_bn, rtol=1e-4, atol=1e-4)
        m = torch.mm(npu(torch.randn(16, 32), FRACTAL_NZ), torch.randn(32, 8).npu())
        assert torch_npu.get_npu_format(m) == FRACTAL_NZ
        # An op with no native format converts (TransData), and returns a base format.
        torch.npu.op_stats(reset=True)
        p = F.max_pool2d(z, 2)
        assert transdata_count() == 1 and torch_npu.get_npu_format(p) == NCHW
    with internal_format(False):
        y = F.conv2d(img.npu(), npu(k, FRACTAL_Z), padding=1)
        assert torch_npu.get_npu_format(y) == NCHW  # base formats only
        assert torch_npu.get_npu_format(torch.relu(npu(img, NC1HWC0))) == NCHW


def test_removing_transdata_by_casting_formats():
    # Seed 003's workflow: find TransData in op_stats, cast once to the format the op wants.
    a = torch.randn(4, 32, 6, 6)
    with internal_format(True):
        x = npu(a, NC1HWC0)
        idx = torch.tensor([3, 1, 0]).npu()
        torch.npu.op_stats(reset=True)
        for _ in range(3):
            x.index_select(1, idx)
        assert transdata_count() == 3  # index_select has no NC1HWC0 kernel: one TransData per call
        plain = torch_npu.npu_format_cast(x, NCHW)
        torch.npu.op_stats(reset=True)
        for _ in range(3):
            r = plain.index_select(1, idx)
        assert transdata_count() == 0
        close(r, a.index_select(1, torch.tensor([3, 1, 0])))


def test_training_step_in_private_formats_matches_cpu():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 5))
    data, target = torch.randn(4, 3, 6, 6), torch.tensor([0, 1, 2, 3])
    cpu_model = copy.deepcopy(model)
    with internal_format(True):
        npu_model = model.npu()
        npu_model[0].weight.data = torch_npu.npu_format_cast(npu_model[0].weight.data, FRACTAL_Z)
        npu_model[4].weight.data = torch_npu.npu_format_cast(npu_model[4].weight.data, FRACTAL_NZ)
        opt = torch.optim.SGD(npu_model.parameters(), lr=0.1)
        loss = F.cross_entropy(npu_model(data.npu()), target.npu())
        torch.npu.op_stats(reset=True)
        loss.backward()
        opt.step()
        assert torch_npu.get_npu_format(npu_model[0].weight) == FRACTAL_Z
        assert torch_npu.get_npu_format(npu_model[4].weight) == FRACTAL_NZ
    cpu_loss = F.cross_entropy(cpu_model(data), target)
    cpu_loss.backward()
    torch.optim.SGD(cpu_model.parameters(), lr=0.1).step()
    close(loss, cpu_loss.detach(), rtol=1e-4, atol=1e-5)
    for p, q in zip(npu_model.parameters(), cpu_model.parameters()):
        close(p.detach(), q.detach(), rtol=1e-3, atol=1e-4)


def test_strict_mode_fallback_sees_logical_values(run_python):
    run_python("""
        import warnings, torch, torch_npu
        warnings.simplefilter("ignore")
        a = torch.randn(3, 17, 4, 4)
        x = torch_npu.npu_format_cast(a.npu(), 3)
        assert torch.allclose(torch.cumsum(x, 1).cpu(), torch.cumsum(a, 1), atol=1e-5)
        x.clamp_(min=0)
        assert torch.equal(x.cpu(), a.clamp(min=0)) and torch_npu.get_npu_format(x) == 3
    """, env={"NPU_SIM_STRICT": "1"})

"""Python-level integration: typed tensors, Tensor.is_npu / .npu(), Module.npu(), torch.npu module,
torch.accelerator, autograd on npu."""

import copy

import pytest
import torch

import torch_npu
from conftest import stall_stream

TYPED = [
    ("FloatTensor", torch.FloatTensor, torch.float32),
    ("DoubleTensor", torch.DoubleTensor, torch.float64),
    ("HalfTensor", torch.HalfTensor, torch.float16),
    ("BFloat16Tensor", torch.BFloat16Tensor, torch.bfloat16),
    ("ByteTensor", torch.ByteTensor, torch.uint8),
    ("CharTensor", torch.CharTensor, torch.int8),
    ("ShortTensor", torch.ShortTensor, torch.int16),
    ("IntTensor", torch.IntTensor, torch.int32),
    ("LongTensor", torch.LongTensor, torch.int64),
    ("BoolTensor", torch.BoolTensor, torch.bool),
]
TYPED_IDS = [t[0] for t in TYPED]


# ---------------------------------------------------------------------------------------------
# typed tensors (torch.npu.FloatTensor & co.), compared with the CPU legacy constructors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,cpu_type,dtype", TYPED, ids=TYPED_IDS)
def test_typed_constructor_from_data(name, cpu_type, dtype):
    npu_type = getattr(torch.npu, name)
    data = [[1, 0, 3], [4, 5, 0]]
    got = npu_type(data)
    expected = cpu_type(data)
    assert got.device.type == "npu"
    assert got.dtype == dtype == expected.dtype
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("name,cpu_type,dtype", TYPED, ids=TYPED_IDS)
def test_typed_constructor_from_sizes(name, cpu_type, dtype):
    npu_type = getattr(torch.npu, name)
    got = npu_type(2, 3)
    assert got.shape == cpu_type(2, 3).shape
    assert got.dtype == dtype and got.device.type == "npu"
    one = npu_type(4)
    assert one.shape == cpu_type(4).shape


@pytest.mark.parametrize("name,cpu_type,dtype", TYPED, ids=TYPED_IDS)
def test_typed_constructor_from_tensor_and_isinstance(name, cpu_type, dtype):
    npu_type = getattr(torch.npu, name)
    src = torch.tensor([0.0, 1.0, 2.0, 7.0])
    got = npu_type(src)
    assert got.device.type == "npu"
    assert torch.equal(got.cpu(), src.to(dtype))
    assert isinstance(got, npu_type)
    assert not isinstance(got.cpu(), npu_type)
    other = torch.float64 if dtype != torch.float64 else torch.float32
    assert not isinstance(got.to(other), npu_type)
    assert got.type() == f"torch.npu.{name}"
    assert got.cpu().type() == cpu_type(1).type()


def test_typed_constructor_rejects_device_argument():
    with pytest.raises(TypeError):
        torch.npu.FloatTensor(2, device="npu")


def test_typed_constructor_on_current_device():
    with torch.npu.device(2):
        x = torch.npu.LongTensor([1, 2])
    assert x.device == torch.device("npu", 2)


def test_tensor_type_with_npu_type_string():
    src = torch.tensor([1.5, -2.5])
    x = src.npu().type("torch.npu.DoubleTensor")
    assert x.device.type == "npu" and x.dtype == torch.float64
    assert torch.equal(x.cpu(), src.double())
    back = x.type("torch.FloatTensor")
    assert back.device.type == "cpu" and torch.equal(back, src)


def test_tensor_type_with_npu_type_class():
    src = torch.tensor([1.5, -2.5])
    assert src.type(torch.DoubleTensor).dtype == torch.float64  # CPU reference
    x = src.npu().type(torch.npu.DoubleTensor)
    assert x.device.type == "npu" and x.dtype == torch.float64


def test_typed_constructor_without_arguments():
    expected = torch.FloatTensor()
    got = torch.npu.FloatTensor()
    assert got.shape == expected.shape and got.device.type == "npu"


def test_typed_constructor_from_torch_size():
    expected = torch.FloatTensor(torch.Size([2, 3]))
    got = torch.npu.FloatTensor(torch.Size([2, 3]))
    assert got.shape == expected.shape


# ---------------------------------------------------------------------------------------------
# Tensor.is_npu, Tensor.npu(), Module.npu(), storages
# ---------------------------------------------------------------------------------------------


def test_tensor_is_npu():
    c = torch.randn(3)
    assert c.is_npu is False
    n = c.npu()
    assert n.is_npu is True
    assert n.cpu().is_npu is False
    assert torch.empty(1, device="npu:4").is_npu


@pytest.mark.parametrize("arg,index", [((), 0), ((1,), 1), (("npu:2",), 2), ((torch.device("npu", 3),), 3)])
def test_tensor_npu_method(arg, index):
    src = torch.randn(2, 3)
    x = src.npu(*arg)
    assert x.device == torch.device("npu", index)
    assert torch.equal(x.cpu(), src)


def test_tensor_npu_method_uses_current_device_and_non_blocking():
    src = torch.randn(5)
    with torch.npu.device(5):
        x = src.npu(non_blocking=True)
    torch.npu.synchronize(5)
    assert x.device == torch.device("npu", 5)
    assert torch.equal(x.cpu(), src)


def test_storage_npu_and_is_npu():
    src = torch.arange(6, dtype=torch.float32)
    st = src.untyped_storage().npu()
    assert st.device.type == "npu" and st.is_npu
    assert not src.untyped_storage().is_npu
    t = torch.empty(0, device="npu").set_(st)
    assert torch.equal(t.cpu(), src)


def test_new_tensor_methods_keep_device():
    x = torch.ones(2, device="npu:2")
    cases = {
        "new_tensor": (x.new_tensor([1.0, 2.0]), torch.ones(2).new_tensor([1.0, 2.0])),
        "new_zeros": (x.new_zeros(3), torch.ones(2).new_zeros(3)),
        "new_ones": (x.new_ones(2, 2), torch.ones(2).new_ones(2, 2)),
        "new_full": (x.new_full((2,), 3.5), torch.ones(2).new_full((2,), 3.5)),
    }
    for name, (got, expected) in cases.items():
        assert got.device == torch.device("npu", 2), name
        assert torch.equal(got.cpu(), expected), name
    assert x.new_empty(4).device == torch.device("npu", 2)


def test_numpy_of_npu_tensor_raises():
    with pytest.raises(TypeError, match="cpu"):
        torch.ones(2, device="npu").numpy()
    a = torch.randn(3)
    assert (a.npu().cpu().numpy() == a.numpy()).all()


@pytest.mark.parametrize("make", [lambda: torch.randn(3, 4), lambda: torch.arange(-5, 5),
                                  lambda: torch.tensor([True, False]), lambda: torch.tensor(2.5),
                                  lambda: torch.randn(2, 3).double() * 1e6])
def test_repr_matches_cpu_plus_device(make):
    a = make()
    text = repr(a.npu())
    assert "device='npu:0'" in text
    assert text.replace(", device='npu:0'", "").replace("\n", "").replace(" ", "") == \
        repr(a).replace("\n", "").replace(" ", "")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 10), torch.nn.Tanh(), torch.nn.Linear(10, 3))


def test_module_npu_moves_parameters_and_forward_matches_cpu():
    cpu_model = _mlp()
    npu_model = copy.deepcopy(cpu_model)
    assert npu_model.npu() is npu_model  # in place, returns self
    for p in npu_model.parameters():
        assert p.device == torch.device("npu", 0)
    x = torch.randn(4, 6)
    torch.testing.assert_close(npu_model(x.npu()).cpu(), cpu_model(x))


def test_module_npu_with_device_index_and_buffers():
    model = torch.nn.BatchNorm1d(4)
    model.npu(1)
    assert model.weight.device == torch.device("npu", 1)
    assert model.running_mean.device == torch.device("npu", 1)
    cpu_model = torch.nn.BatchNorm1d(4)
    x = torch.randn(8, 4)
    torch.testing.assert_close(model(x.npu(1)).cpu(), cpu_model(x))
    assert model.num_batches_tracked.item() == cpu_model.num_batches_tracked.item()


def test_batchnorm_updates_running_stats_like_cpu():
    model = torch.nn.BatchNorm1d(4).npu()
    cpu_model = torch.nn.BatchNorm1d(4)
    x = torch.randn(8, 4)
    model(x.npu())
    cpu_model(x)
    torch.testing.assert_close(model.running_mean.cpu(), cpu_model.running_mean)
    torch.testing.assert_close(model.running_var.cpu(), cpu_model.running_var)


def test_module_to_npu_and_back():
    cpu_model = _mlp()
    m = copy.deepcopy(cpu_model).to("npu").cpu()
    for (k, a), (_, b) in zip(m.state_dict().items(), cpu_model.state_dict().items()):
        assert a.device.type == "cpu", k
        assert torch.equal(a, b), k


def test_module_dtype_conversion_on_npu():
    cpu_model = _mlp()
    for convert, dtype in ((lambda m: m.double(), torch.float64), (lambda m: m.half(), torch.float16),
                           (lambda m: m.to(torch.bfloat16), torch.bfloat16)):
        m = copy.deepcopy(cpu_model).npu()
        stall_stream()  # the conversion copies queue behind it, as they would behind real work
        m = convert(m)
        for (k, a), (_, b) in zip(m.state_dict().items(), cpu_model.state_dict().items()):
            assert a.device.type == "npu" and a.dtype == dtype, k
            assert torch.equal(a.cpu(), b.to(dtype)), k


# ---------------------------------------------------------------------------------------------
# the torch.npu module and torch.accelerator
# ---------------------------------------------------------------------------------------------


def test_torch_npu_is_registered_device_module():
    assert torch.npu is torch_npu.npu
    assert torch._C._get_privateuse1_backend_name() == "npu"
    assert torch.npu.is_initialized()
    torch.npu.init()
    assert hasattr(torch.Tensor, "npu") and hasattr(torch.Tensor, "is_npu")
    assert hasattr(torch.nn.Module, "npu")


def test_torch_accelerator_device_index():
    assert torch.accelerator.current_device_index() == 0
    torch.accelerator.set_device_index(2)
    assert torch.npu.current_device() == 2
    with torch.accelerator.device_index(4):
        assert torch.npu.current_device() == 4
        x = torch.ones(3, device="npu")
    assert x.device == torch.device("npu", 4)
    assert torch.npu.current_device() == 2


def test_torch_accelerator_synchronize_and_compute():
    a = torch.randn(8, 8)
    x = a.to(torch.accelerator.current_accelerator())
    assert x.device.type == "npu"
    y = (x * x).sum(dim=0)
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(0)
    torch.testing.assert_close(y.cpu(), (a * a).sum(dim=0))


def test_batchnorm_train_backward_and_eval_match_cpu():
    torch.manual_seed(0)
    cpu_bn = torch.nn.BatchNorm2d(3)
    npu_bn = copy.deepcopy(cpu_bn).npu()
    x = torch.randn(4, 3, 5, 5)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    cpu_bn(xc).square().sum().backward()
    npu_bn(xn).square().sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(npu_bn.weight.grad.cpu(), cpu_bn.weight.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(npu_bn.running_mean.cpu(), cpu_bn.running_mean)
    torch.testing.assert_close(npu_bn.running_var.cpu(), cpu_bn.running_var)
    cpu_bn.eval()
    npu_bn.eval()
    torch.testing.assert_close(npu_bn(x.npu()).cpu(), cpu_bn(x))


def test_conv2d_forward_backward_matches_cpu():
    torch.manual_seed(0)
    cpu_conv = torch.nn.Conv2d(2, 4, 3, padding=1)
    npu_conv = copy.deepcopy(cpu_conv).npu()
    x = torch.randn(2, 2, 6, 6)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    out_c, out_n = cpu_conv(xc), npu_conv(xn)
    assert out_n.device.type == "npu"
    torch.testing.assert_close(out_n.cpu(), out_c)
    out_c.square().sum().backward()
    out_n.square().sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    torch.testing.assert_close(npu_conv.weight.grad.cpu(), cpu_conv.weight.grad)
    torch.testing.assert_close(npu_conv.bias.grad.cpu(), cpu_conv.bias.grad)


def test_get_amp_supported_dtype():
    dtypes = torch.npu.get_amp_supported_dtype()
    assert torch.float16 in dtypes and torch.bfloat16 in dtypes


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_matmul(dtype):
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    x, y = a.npu(), b.npu()
    with torch.autocast("npu", dtype=dtype):
        out = x @ y
        soft = torch.softmax(out, dim=-1)
    assert out.dtype == dtype and out.device.type == "npu"
    assert soft.dtype == torch.float32
    # the same computation done by hand in the lower precision on the CPU
    torch.testing.assert_close(out.cpu(), a.to(dtype) @ b.to(dtype))
    torch.testing.assert_close(soft.cpu(), torch.softmax((a.to(dtype) @ b.to(dtype)).float(), dim=-1))
    with torch.autocast("npu", dtype=dtype, enabled=False):
        assert (x @ y).dtype == torch.float32


def test_autocast_training_with_grad_scaler_matches_cpu():
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(4, 2)
    npu_model = copy.deepcopy(cpu_model).npu()
    initial = cpu_model.weight.detach().clone()
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(3, 4, generator=g) * 0.1 for _ in range(4)]
    scales = {}
    for device, model in (("cpu", cpu_model), ("npu", npu_model)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=2.0**18)  # the first steps overflow in fp16
        for xb in batches:
            opt.zero_grad()
            with torch.autocast(device, dtype=torch.float16):
                out = model(xb.to(device))
                assert out.dtype == torch.float16
                loss = out.float().square().sum()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        scales[device] = scaler.get_scale()
    assert scales["npu"] == scales["cpu"]
    assert scales["cpu"] < 2.0**18  # some steps were skipped and the scale backed off
    assert not torch.equal(cpu_model.weight.detach(), initial)  # and some were taken
    torch.testing.assert_close(npu_model.weight.cpu(), cpu_model.weight)
    torch.testing.assert_close(npu_model.bias.cpu(), cpu_model.bias)


# ---------------------------------------------------------------------------------------------
# autograd
# ---------------------------------------------------------------------------------------------


def test_linear_loss_backward_matches_cpu():
    torch.manual_seed(1)
    cpu_model = torch.nn.Linear(5, 3)
    npu_model = copy.deepcopy(cpu_model).npu()
    x, target = torch.randn(7, 5), torch.randn(7, 3)
    loss_cpu = torch.nn.functional.mse_loss(cpu_model(x), target)
    loss_npu = torch.nn.functional.mse_loss(npu_model(x.npu()), target.npu())
    loss_cpu.backward()
    loss_npu.backward()
    assert loss_npu.device.type == "npu"
    torch.testing.assert_close(loss_npu.cpu(), loss_cpu)
    assert npu_model.weight.grad.device == torch.device("npu", 0)
    torch.testing.assert_close(npu_model.weight.grad.cpu(), cpu_model.weight.grad)
    torch.testing.assert_close(npu_model.bias.grad.cpu(), cpu_model.bias.grad)


def test_input_gradient_through_views_and_copies():
    a = torch.randn(4, 6)
    xc = a.clone().requires_grad_()
    xn = a.npu().requires_grad_()
    for x in (xc, xn):
        y = (x.t()[::2] * 3).sum() + (x[1:, :3] ** 2).sum()
        y.backward()
    assert xn.grad.device.type == "npu"
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


def test_gradient_flows_across_device_copies():
    a = torch.randn(5, requires_grad=True)
    y = (a.npu() * 2).to("npu:1").cpu().sum()
    y.backward()
    torch.testing.assert_close(a.grad, torch.full((5,), 2.0))


def test_training_steps_match_cpu():
    cpu_model = _mlp()
    npu_model = copy.deepcopy(cpu_model).npu()
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=0.05, momentum=0.9)
    opt_n = torch.optim.SGD(npu_model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
        for model, opt, xx, yy in ((cpu_model, opt_c, x, y), (npu_model, opt_n, x.npu(), y.npu())):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xx), yy).backward()
            opt.step()
    for (k, p), (_, q) in zip(npu_model.state_dict().items(), cpu_model.state_dict().items()):
        torch.testing.assert_close(p.cpu(), q, msg=k)

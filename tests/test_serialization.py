"""torch.save / torch.load of npu tensors and module state dicts, with and without map_location."""

import io

import pytest
import torch


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_save_load_tensor_keeps_device_and_values(dtype):
    ref = (torch.randn(5, 3) * 10).to(dtype)
    x = ref.npu()
    y = _round_trip(x)
    assert y.device == x.device
    assert y.dtype == dtype
    assert torch.equal(y.cpu(), ref)


def test_save_load_keeps_non_default_device_index():
    ref = torch.randn(4, 4)
    y = _round_trip({"a": ref.to("npu:3"), "b": ref.to("npu:1")})
    assert y["a"].device == torch.device("npu", 3)
    assert y["b"].device == torch.device("npu", 1)
    assert torch.equal(y["a"].cpu(), ref) and torch.equal(y["b"].cpu(), ref)


@pytest.mark.parametrize("location", ["cpu", torch.device("cpu")])
def test_load_with_map_location_cpu(location):
    ref = torch.randn(6)
    y = _round_trip(ref.to("npu:2"), map_location=location)
    assert y.device.type == "cpu"
    assert torch.equal(y, ref)


@pytest.mark.parametrize("location", ["npu:1", torch.device("npu", 1), {"npu:0": "npu:1"}])
def test_load_with_map_location_npu1(location):
    ref = torch.randn(6)
    y = _round_trip(ref.to("npu:0"), map_location=location)
    assert y.device == torch.device("npu", 1)
    assert torch.equal(y.cpu(), ref)


def test_load_onto_missing_device_raises():
    buf = io.BytesIO()
    torch.save(torch.ones(2).npu(), buf)
    buf.seek(0)
    with pytest.raises(RuntimeError):
        torch.load(buf, map_location="npu:99")


def test_load_cpu_tensor_onto_npu():
    ref = torch.randn(3, 2)
    y = _round_trip(ref, map_location="npu")
    assert y.device.type == "npu"
    assert torch.equal(y.cpu(), ref)


def test_load_with_callable_map_location():
    ref = torch.randn(3)
    y = _round_trip(ref.npu(), map_location=lambda storage, loc: storage)
    assert y.device.type == "cpu"
    assert torch.equal(y, ref)


def test_save_load_noncontiguous_views_keep_sharing():
    base_cpu = torch.arange(24.0).reshape(4, 6)
    base = base_cpu.npu()
    loaded = _round_trip({"base": base, "t": base.t(), "col": base[:, 2]})
    assert torch.equal(loaded["t"].cpu(), base_cpu.t())
    assert torch.equal(loaded["col"].cpu(), base_cpu[:, 2])
    assert loaded["t"].stride() == base.t().stride()
    # views are saved with their storage: writes through one are seen by the others after loading
    loaded["col"].fill_(-1.0)
    base_cpu[:, 2] = -1.0
    assert torch.equal(loaded["base"].cpu(), base_cpu)
    assert torch.equal(loaded["t"].cpu(), base_cpu.t())


def test_save_load_to_file(tmp_path):
    ref = torch.randn(7, 2)
    path = tmp_path / "t.pt"
    torch.save({"x": ref.npu(), "step": 3}, path)
    data = torch.load(path)
    assert data["step"] == 3
    assert data["x"].device.type == "npu"
    assert torch.equal(data["x"].cpu(), ref)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_module_state_dict_round_trip():
    cpu_model = _model()
    npu_model = _model().npu()
    sd = _round_trip(npu_model.state_dict())
    for k, v in sd.items():
        assert v.device.type == "npu", k
        assert torch.equal(v.cpu(), cpu_model.state_dict()[k]), k

    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).npu()
    fresh.load_state_dict(sd)
    x = torch.randn(5, 4)
    torch.testing.assert_close(fresh(x.npu()).cpu(), cpu_model(x))


def test_state_dict_saved_on_npu_loaded_on_cpu_and_npu1():
    cpu_model = _model()
    npu_model = _model().npu()
    buf = io.BytesIO()
    torch.save(npu_model.state_dict(), buf)
    for location, expected in (("cpu", torch.device("cpu")), ("npu:1", torch.device("npu", 1))):
        buf.seek(0)
        sd = torch.load(buf, map_location=location)
        assert all(v.device == expected for v in sd.values())
        m = _model()
        m.load_state_dict(sd)  # into a CPU module: copies across devices
        x = torch.randn(3, 4)
        torch.testing.assert_close(m(x), cpu_model(x))


def test_optimizer_state_round_trip():
    model = _model().npu()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(2, 4).npu()).sum().backward()
    opt.step()
    sd = _round_trip(opt.state_dict())
    for state in sd["state"].values():
        assert state["exp_avg"].device.type == "npu"
    ref = opt.state_dict()
    for k, state in sd["state"].items():
        assert torch.equal(state["exp_avg"].cpu(), ref["state"][k]["exp_avg"].cpu())
        assert torch.equal(state["exp_avg_sq"].cpu(), ref["state"][k]["exp_avg_sq"].cpu())

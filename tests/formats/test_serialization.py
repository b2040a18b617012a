"""torch.save / torch.load keep private formats: the file holds the logical values (loadable on the
CPU) and the format, which loading on npu restores."""

import io

import pytest
import torch

import torch_npu

from .reference import FRACTAL_NZ, FRACTAL_Z, FRACTAL_Z_3D, NC1HWC0, NDC1HWC0


def round_trip(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kw)


@pytest.mark.parametrize("fmt,shape", [(NC1HWC0, (2, 17, 3, 3)), (FRACTAL_Z, (33, 5, 3, 3)),
                                       (FRACTAL_NZ, (3, 15, 33)), (NDC1HWC0, (2, 17, 2, 3, 3)),
                                       (FRACTAL_Z_3D, (17, 3, 2, 2, 2))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8])
def test_save_load_keeps_format_and_values(fmt, shape, dtype):
    ref = (torch.randn(shape) * 5).to(dtype)
    x = torch_npu.npu_format_cast(ref.npu(), fmt)
    y = round_trip(x)
    assert y.device == x.device and torch_npu.get_npu_format(y) == fmt
    assert torch_npu._C._npu_storage_desc(y) == torch_npu._C._npu_storage_desc(x)
    assert y.untyped_storage().nbytes() == x.untyped_storage().nbytes()
    assert torch.equal(y.cpu(), ref)
    # On the CPU the same file holds plain values.
    z = round_trip(x, map_location="cpu")
    assert z.device.type == "cpu" and torch.equal(z, ref)


def test_state_dicts_views_and_shared_storages():
    conv = torch.nn.Conv2d(3, 20, 3).npu()
    conv.weight.data = torch_npu.npu_format_cast(conv.weight.data, FRACTAL_Z)
    base = torch_npu.npu_format_cast(torch.randn(4, 20, 2, 2).npu(), NC1HWC0)
    loaded = round_trip({"state": conv.state_dict(), "base": base, "part": base[1:3], "row": base[2, 5]})
    assert torch_npu.get_npu_format(loaded["state"]["weight"]) == FRACTAL_Z
    assert torch.equal(loaded["state"]["weight"].cpu(), conv.weight.cpu())
    assert torch.equal(loaded["base"].cpu(), base.cpu())
    assert torch.equal(loaded["part"].cpu(), base[1:3].cpu())
    assert torch.equal(loaded["row"].cpu(), base[2, 5].cpu())
    # The view still shares the base's (private) storage after loading.
    assert loaded["part"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr()
    assert torch_npu.get_npu_format(loaded["part"]) == NC1HWC0
    fresh = torch.nn.Conv2d(3, 20, 3).npu()
    fresh.load_state_dict(loaded["state"])
    assert torch.equal(fresh.weight.cpu(), conv.weight.cpu())


def test_storage_level_copies_read_logical_values():
    ref = torch.arange(2 * 17 * 9, dtype=torch.float32).view(2, 17, 3, 3)
    x = torch_npu.npu_format_cast(ref.npu(), NC1HWC0)
    host = x.untyped_storage().cpu()
    assert host.nbytes() == x.untyped_storage().nbytes()
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(host)[: ref.numel()], ref.view(-1))
    clone = x.untyped_storage().clone()
    assert torch.equal(torch.empty(0, device="npu").set_(clone, 0, ref.shape, ref.stride()).cpu(), ref)

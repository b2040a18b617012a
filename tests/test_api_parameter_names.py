"""Parameter names and order of torch.npu functions that callers pass by keyword or position, as torch_npu
(and torch.cuda) name them: a mismatch fails a keyword call, or silently swaps positional arguments."""

import inspect

import torch
import torch_npu  # noqa: F401

EXPECTED = {
    torch.npu.set_device: ["device"],
    torch.npu.synchronize: ["device"],
    torch.npu.get_device_name: ["device_name"],
    torch.npu.get_device_properties: ["device_name"],
    torch.npu.get_device_capability: ["device"],
    torch.npu.amp.GradScaler: ["init_scale", "growth_factor", "backoff_factor", "growth_interval", "dynamic",
                               "enabled"],
}


def test_parameter_names_and_order():
    for fn, names in EXPECTED.items():
        params = [p for p in inspect.signature(fn).parameters if p != "self"]
        assert params == names, (fn, params)
    assert list(inspect.signature(torch.npu.device.__init__).parameters)[1:] == ["device"]


def test_keyword_and_positional_calls_do_what_they_say():
    torch.npu.set_device(device=0)
    torch.npu.synchronize(device=0)
    assert torch.npu.get_device_name(device_name=0) == torch.npu.get_device_name()
    assert torch.npu.get_device_properties(device_name=0).name == torch.npu.get_device_name()
    with torch.npu.device(device=0):
        assert torch.npu.current_device() == 0
    # The fifth positional argument is `dynamic`: a static loss scale stays put after an overflow.
    scaler = torch.npu.amp.GradScaler(2.0 ** 4, 2.0, 0.5, 2000, False)
    assert scaler.dynamic is False and scaler.is_enabled()
    p = torch.nn.Parameter(torch.ones(2, device="npu"))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler.scale((p * float("inf")).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 4


def test_memory_aliases_and_schedule_skip_first_wait():
    x = torch.empty(1 << 20, device="npu")
    torch.npu.synchronize()
    assert torch.npu.memory_cached() == torch.npu.memory_reserved() > 0
    assert torch.npu.max_memory_cached() == torch.npu.max_memory_reserved()
    del x
    torch.npu.empty_cache()
    torch.npu.reset_max_memory_allocated()
    assert torch.npu.max_memory_allocated() == torch.npu.memory_allocated()
    torch.npu.reset_max_memory_cached()
    assert torch.npu.max_memory_cached() == torch.npu.memory_reserved()
    from torch_npu.profiler import ProfilerAction, schedule
    s = schedule(wait=2, active=1, skip_first_wait=1)
    assert s(0) == ProfilerAction.RECORD_AND_SAVE  # the first cycle's wait is left out
    assert [s(i) for i in range(1, 4)] == [ProfilerAction.NONE, ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE]


def test_experimental_config_takes_mstx_in_torch_npus_position():
    import inspect as _inspect
    from torch_npu.profiler import _ExperimentalConfig
    params = list(_inspect.signature(_ExperimentalConfig).parameters)
    assert params[:6] == ["profiler_level", "aic_metrics", "l2_cache", "msprof_tx", "mstx", "data_simplification"]
    assert _ExperimentalConfig(mstx=True)._msprof_tx and _ExperimentalConfig(msprof_tx=True)._msprof_tx
    assert not _ExperimentalConfig()._msprof_tx

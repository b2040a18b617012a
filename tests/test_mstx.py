"""torch.npu.mstx markers and ranges in torch_npu.profiler's trace: recorded with mstx=True (or
msprof_tx=True), filtered by domain, absent otherwise."""

import json
import threading

import pytest
import torch

import torch_npu

P = torch_npu.profiler


def annotations(trace_path):
    with open(trace_path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return {e["name"]: e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"}


def profile_with(tmp_path, body, **config):
    prof = P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                     experimental_config=P._ExperimentalConfig(**config))
    with prof:
        body()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    return annotations(path)


def workload():
    x = torch.ones(64, device="npu")
    torch.npu.mstx.mark("loaded")
    rid = torch.npu.mstx.range_start("forward")
    y = (x * 2).sum()
    torch.npu.mstx.range_end(rid)
    with torch.npu.mstx.mstx_range("step", domain="train"):
        torch.npu.mstx.range_push("inner")
        y = y + 1
        assert torch.npu.mstx.range_pop() == 0

    @torch.npu.mstx.annotate()
    def compute_loss():
        return (y * 3).item()

    compute_loss()
    torch.npu.synchronize()


def test_markers_and_ranges_in_the_trace(tmp_path):
    found = profile_with(tmp_path, workload, mstx=True)
    assert {"loaded", "forward", "step", "inner"} <= set(found)
    assert any(name.endswith("compute_loss") for name in found)
    # The range encloses what ran inside it: the step range covers the inner push / pop range.
    step, inner = found["step"], found["inner"]
    assert step["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= step["ts"] + step["dur"] + 1e-3


def test_nothing_recorded_without_mstx(tmp_path):
    found = profile_with(tmp_path, workload)
    assert not {"loaded", "forward", "step", "inner"} & set(found)
    assert torch.npu.mstx.range_start("outside any profile") == 0  # no profile: nothing opens


def test_domain_filters(tmp_path):
    assert set(profile_with(tmp_path, workload, mstx=True, mstx_domain_include=["train"])) & \
        {"loaded", "forward", "step"} == {"step"}
    assert "step" not in profile_with(tmp_path, workload, msprof_tx=True, mstx_domain_exclude=["train"])


def test_a_range_may_end_on_another_thread(tmp_path):
    def body():
        rid = torch.npu.mstx.range_start("handoff")
        t = threading.Thread(target=torch.npu.mstx.range_end, args=(rid,))
        t.start()
        t.join()
        with pytest.warns(UserWarning, match="not open"):  # ended twice: warned about, as upstream
            torch.npu.mstx.range_end(rid)

    assert "handoff" in profile_with(tmp_path, body, mstx=True)


def test_bad_arguments():
    with pytest.raises(TypeError, match="mstx_domain_include"):
        P._ExperimentalConfig(mstx=True, mstx_domain_include="train")
    with pytest.raises(ValueError, match="host_sys"):
        P._ExperimentalConfig(host_sys=["gpu"])
    with pytest.warns(UserWarning, match="does not collect"):
        config = P._ExperimentalConfig(host_sys=[P.HostSystem.CPU], sys_io=True)
    assert config.to_dict()["host_sys"] == ["cpu"] and config.to_dict()["sys_io"] is True


def test_invalid_arguments_are_warned_about_and_ignored():
    """As upstream: a bad message / domain / stream warns and returns the neutral value, the program goes on."""
    mstx = torch_npu.npu.mstx
    with pytest.warns(UserWarning, match="message must be a non-empty str"):
        assert mstx.mark("") is None
    with pytest.warns(UserWarning, match="domain must be a non-empty str"):
        assert mstx.range_start("a", None, domain=1) == 0
    with pytest.warns(UserWarning, match="stream must be None or a torch.npu.Stream"):
        assert mstx.range_push("a", stream=1) == -1
    with pytest.warns(UserWarning, match="range_id must be an int"):
        mstx.range_end("not an id")
    with pytest.warns(UserWarning, match="domain must be a non-empty str"):
        assert mstx.range_pop(domain="") == -1


def test_calls_go_through_the_recording_layer_with_the_streams_place(tmp_path):
    """torch_npu._C._mstx is the layer the public calls reach (host forms without a stream; the
    stream's id, device index and type otherwise), so a tool can wrap it."""
    layer = torch_npu._C._mstx
    seen = []
    original = layer._mark, layer._range_start
    layer._mark = lambda *args: seen.append(("mark", args))
    layer._range_start = lambda *args: seen.append(("range_start", args)) or 7
    try:
        s = torch.npu.current_stream()
        torch_npu.npu.mstx.mark("m", stream=s, domain="d")
        assert torch_npu.npu.mstx.range_start("r", s) == 7
    finally:
        layer._mark, layer._range_start = original
    assert seen == [("mark", ("m", s.stream_id, s.device_index, int(s.device_type), "d")),
                    ("range_start", ("r", s.stream_id, s.device_index, int(s.device_type), "default"))]
    # Host forms still record into a profile.
    events = profile_with(tmp_path, lambda: torch_npu.npu.mstx.mark("host mark"), mstx=True)
    assert "host mark" in events
    depth = [torch_npu.npu.mstx.range_push("outer"), torch_npu.npu.mstx.range_push("inner")]
    assert depth == [0, 1] and torch_npu.npu.mstx.range_pop() == 1 and torch_npu.npu.mstx.range_pop() == 0
    assert torch_npu.npu.mstx.range_pop() == -1

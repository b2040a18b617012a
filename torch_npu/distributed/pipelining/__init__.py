"""torch_npu.distributed.pipelining: pipeline() splits a model into pipeline stages for
torch.distributed.pipelining's schedules (stages on npu devices send activations over hccl), tracing it
with torch.export (mode None / "export") or with torch.fx (mode "fx", for models export cannot
capture; `atomic_units` names submodules kept whole as single calls)."""

import contextlib

import torch
from torch import fx
from torch.distributed.pipelining import _IR
from torch.distributed.pipelining import pipeline as _torch_pipeline
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.utils import _pytree as pytree

__all__ = ["pipeline"]


class _TracedProgram:
    """What Pipe._from_traced reads from an ExportedProgram: module() giving the traced graph module."""

    def __init__(self, graph_module: fx.GraphModule):
        self._graph_module = graph_module

    def module(self, *args, **kwargs) -> fx.GraphModule:
        return self._graph_module


def _fx_trace(module, atomic_units, example_args, example_kwargs):
    names = set(atomic_units or ())
    missing = names - {name for name, _ in module.named_modules()}
    if missing:
        raise ValueError(f"pipeline: atomic_units {sorted(missing)} are not submodules of the model")

    class _Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            if qualname in names:
                return True
            if "forward" in vars(m):  # a split point: annotate_split_points wrapped its forward
                return False
            return super().is_leaf_module(m, qualname)

    tracer = _Tracer()
    # pipe_split() takes no tensors, so FX would run it instead of recording it: record the marker op.
    marker = _IR.pipe_split
    _IR.pipe_split = lambda: tracer.create_proxy("call_function", _IR.aten_pipe_split_alias, (), {})
    try:
        graph = tracer.trace(module)
    finally:
        _IR.pipe_split = marker
    # As export's graphs do, the graph takes its inputs through a pytree spec (the first stage reuses it).
    names = [node.target for node in graph.nodes if node.op == "placeholder"]
    _, in_spec = pytree.tree_flatten((tuple(example_args), dict(example_kwargs or {})))
    graph._codegen = _PyTreeCodeGen(_PyTreeInfo(names, in_spec, None))
    traced = fx.GraphModule(module, graph)
    # Stages size their receive buffers from each node's example value ("val"), as export records them.
    flat_args, _ = pytree.tree_flatten((tuple(example_args), dict(example_kwargs or {})))
    FakeTensorProp(traced, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*flat_args)
    return traced


@contextlib.contextmanager
def _traced_with_fx(atomic_units):
    original_trace, original_outline = _IR.Pipe._trace_with_export, _IR._outline_submodules

    def trace(mod, example_args, example_kwargs=None):
        return _TracedProgram(_fx_trace(mod, atomic_units, example_args, example_kwargs))

    # Export's graphs say which module each node came from, and stages are re-nested by it; an FX
    # graph keeps leaf modules as calls and the rest flat, so each stage keeps its graph as it is.
    _IR.Pipe._trace_with_export = staticmethod(trace)
    _IR._outline_submodules = lambda graph: graph.owning_module
    try:
        yield
    finally:
        _IR.Pipe._trace_with_export, _IR._outline_submodules = original_trace, original_outline


def pipeline(module: torch.nn.Module, mb_args, mb_kwargs=None, split_spec=None, split_policy=None, mode=None,
             atomic_units=None):
    """Splits `module` at `split_spec` (submodule name -> SplitPoint) or by `split_policy` into a Pipe
    whose stages Pipe.build_stage(i, device) builds. mb_args / mb_kwargs are one microbatch's inputs."""
    if split_spec is not None and split_policy is not None:
        raise ValueError("pipeline: pass split_spec or split_policy, not both")
    if mode in (None, "export"):
        if atomic_units is not None:
            raise ValueError("pipeline: atomic_units are only used by mode='fx'")
        return _torch_pipeline(module, mb_args, mb_kwargs, split_spec=split_spec, split_policy=split_policy)
    if mode != "fx":
        raise ValueError(f"pipeline: mode must be None, 'export' or 'fx', got {mode!r}")
    with _traced_with_fx(atomic_units):
        return _torch_pipeline(module, mb_args, mb_kwargs, split_spec=split_spec, split_policy=split_policy)

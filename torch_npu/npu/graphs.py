"""NPU graphs: capture the work launched on a stream once and replay it (torch.cuda.graphs' API on
npu, as torch_npu exposes it): NPUGraph, graph, make_graphed_callables, graph_pool_handle and
is_current_stream_capturing."""

import dataclasses
import gc
import typing

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu import _C
from torch_npu.npu._npugraph_handlers.npugraph_handler import (
    _NPU_GRAPH_OP_HANDLERS,
    NpuGraphOpHandler,
    register_npu_graph_handler,
)
from torch_npu.npu.streams import Stream, current_stream, stream as _stream_ctx

__all__ = [
    "NPUGraph",
    "NpuGraphOpHandler",
    "graph",
    "graph_pool_handle",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "is_current_stream_capturing",
    "make_graphed_callables",
    "register_npu_graph_handler",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
]


def is_current_stream_capturing() -> bool:
    """True while the current npu stream is capturing a graph."""
    return _C._npu_isCurrentStreamCapturing()


def graph_pool_handle():
    """An id for a memory pool that several graphs share (pass it as ``pool=`` to each capture)."""
    return tuple(_C._graph_pool_handle())


def _where(stream):
    return {"stream_id": stream.stream_id, "device_index": stream.device_index, "device_type": stream.device_type}


def graph_task_group_begin(stream):
    """Inside a capture on ``stream``: the tasks launched from here to graph_task_group_end form a
    group that graph_task_update_* can replace after the capture."""
    _C._npu_graph_task_group_begin(**_where(stream))


def graph_task_group_end(stream):
    """Ends the group begun on ``stream``; returns its handle (for graph_task_update_begin)."""
    return _C._npu_graph_task_group_end(**_where(stream))


def graph_task_update_begin(stream, handle):
    """On ``stream`` (not capturing): the work launched from here to graph_task_update_end is recorded
    as the new tasks of the group ``handle``, instead of running."""
    _C._npu_graph_task_update_begin(**_where(stream), handle=handle)


def graph_task_update_end(stream):
    """Ends the update on ``stream`` and queues the swap there: replays ordered after it (wait for
    the stream, or an ExternalEvent recorded on it) run the new tasks."""
    _C._npu_graph_task_update_end(**_where(stream))


# Super kernels: on Ascend hardware, the tasks of a scope (or of a whole graph, super_kernel_optimize)
# are fused into one kernel launch. A replay on the software NPU already runs the whole graph as one
# task; a scope makes its tasks one task of the graph too (a task group, which debug_dump and
# profilers show as one).
_scopes = {}  # stream key -> names of the open scopes on it (outermost first)


def _check_scope_name(scope_name):
    if scope_name is not None and (not isinstance(scope_name, str) or not scope_name.strip()):
        raise RuntimeError(f"super kernel scope_name must be None or a non-blank string, got {scope_name!r}")


def super_kernel_scope_begin(scope_name: typing.Optional[str] = None):
    """Opens a super kernel scope on the current stream: while it captures, the tasks launched until the
    matching super_kernel_scope_end become one task of the graph. Outside a capture it only checks."""
    _check_scope_name(scope_name)
    stream = current_stream()
    key = (stream.device_index, stream.stream_id)
    open_scopes = _scopes.setdefault(key, [])
    if not open_scopes and is_current_stream_capturing():
        graph_task_group_begin(stream)
        open_scopes.append((scope_name, True))
    else:
        open_scopes.append((scope_name, False))


def super_kernel_scope_end(scope_name: typing.Optional[str] = None):
    """Closes the innermost super kernel scope of the current stream (named like its begin, if named)."""
    _check_scope_name(scope_name)
    stream = current_stream()
    open_scopes = _scopes.get((stream.device_index, stream.stream_id))
    if not open_scopes:
        raise RuntimeError("super_kernel_scope_end without a matching super_kernel_scope_begin on this stream")
    name, grouped = open_scopes[-1]
    if scope_name is not None and name is not None and scope_name != name:
        raise RuntimeError(f"super_kernel_scope_end({scope_name!r}) does not match the innermost open scope {name!r}")
    open_scopes.pop()
    if grouped:
        graph_task_group_end(stream)


_SUPER_KERNEL_OPTIONS = {
    "optimize_options": {
        "preload_code": int, "split_mode": int, "stream_fusion": int, "constant_codegen": int,
        "auto_op_parallel": int, "opt_extend": str, "early_start": int,
        "dcci_before_kernel_start": [str], "dcci_after_kernel_end": [str], "dcci_disable_on_kernel": [str],
        "ubuf_lock_ignore_kernel": [str],
        "aggressive_opt_strategies": {"event_breaker_bypass": int, "value_breaker_bypass": int,
                                      "task_breaker_bypass": int},
    },
    "debug_options": {
        "debug_sync_all": int, "debug_op_exec_trace": int, "debug_cross_core_sync_check": int,
        "debug_extend": str, "debug_per_op_max_core_num": int,
    },
}


def _check_super_kernel_options(kind, options):
    if options is None:
        return
    if not isinstance(options, dict):
        raise RuntimeError(f"{kind} must be a dict or None, got {type(options).__name__}")
    schema = _SUPER_KERNEL_OPTIONS[kind]
    for key, value in options.items():
        if key not in schema:
            raise RuntimeError(f"{kind}: unknown key {key!r} (known: {', '.join(sorted(schema))})")
        expected = schema[key]
        if isinstance(expected, list):  # a list of elements of that type
            if not isinstance(value, list) or not all(isinstance(v, expected[0]) for v in value):
                raise RuntimeError(f"{kind}[{key!r}] must be a list of {expected[0].__name__}, got {value!r}")
        elif isinstance(expected, dict):  # a dict with these keys
            if not isinstance(value, dict):
                raise RuntimeError(f"{kind}[{key!r}] must be a dict, got {type(value).__name__}")
            for sub_key, sub_value in value.items():
                if sub_key not in expected:
                    raise RuntimeError(f"{kind}[{key!r}]: unknown key {sub_key!r} (known: {', '.join(sorted(expected))})")
                if not isinstance(sub_value, expected[sub_key]):
                    raise RuntimeError(f"{kind}[{key!r}][{sub_key!r}] must be {expected[sub_key].__name__}, "
                                       f"got {type(sub_value).__name__}")
        elif not isinstance(value, expected):
            raise RuntimeError(f"{kind}[{key!r}] must be {expected.__name__}, got {type(value).__name__}")


@dataclasses.dataclass
class _DispatchRecord:
    """One call of a handled op recorded during capture (auto_dispatch_capture)."""

    handle: typing.Any
    op_cache_entry: typing.Any  # the op overload the capture ran
    args: list
    kwargs: dict
    outputs: list  # the tensors the capture returned: updates write their results into them
    keep: typing.Any = None  # the latest update's own results (their memory is in use by replays)


class _GraphDispatchMode(TorchDispatchMode):
    """Records each call of an op with a registered handler as a task group of its own."""

    update_stream = None  # one for the process, shared by every graph

    def __init__(self):
        super().__init__()
        if _GraphDispatchMode.update_stream is None:
            _GraphDispatchMode.update_stream = Stream()
        self.records = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _NPU_GRAPH_OP_HANDLERS.get(func.__name__)
        if handler is None or (hasattr(handler, "should_handle") and not handler.should_handle(func, args, kwargs)):
            return func(*args, **kwargs)
        stream = current_stream()
        func, args, kwargs = handler.prepare_capture(func, args, kwargs)
        graph_task_group_begin(stream)
        result = func(*args, **kwargs)
        handle = graph_task_group_end(stream)
        tensor_names = [a.name for a in func._schema.arguments if "Tensor" in str(a.type)]
        self.records.append(_DispatchRecord(
            handle=handle, op_cache_entry=func, args=list(args),
            kwargs={k: handler.record_wrap_kwarg(k, v, tensor_names) for k, v in kwargs.items()},
            outputs=[t for t in torch.utils._pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]))
        return handler.postprocess_result(result, kwargs)

    def update(self, cpu_update_input):
        if not self.records:
            raise RuntimeError("NPUGraph.update: the capture recorded no op with a graph handler; capture with "
                               "torch.npu.graph(g, auto_dispatch_capture=True) around registered ops "
                               f"({', '.join(sorted(_NPU_GRAPH_OP_HANDLERS))})")
        if not isinstance(cpu_update_input, (list, tuple)) or not all(isinstance(u, dict) for u in cpu_update_input):
            raise TypeError("NPUGraph.update: cpu_update_input must be a list of dicts, one per recorded op "
                            "(or one dict for all of them)")
        updates = list(cpu_update_input)
        if len(updates) == 1:
            updates = [dict(updates[0]) for _ in self.records]
        if len(updates) != len(self.records):
            raise ValueError(f"NPUGraph.update: the capture recorded {len(self.records)} ops with graph handlers "
                             f"but cpu_update_input has {len(updates)} entries")
        caller = current_stream()
        updater = self.update_stream
        updater.wait_stream(caller)
        with _stream_ctx(updater):
            for record, update in zip(self.records, updates):
                handler = _NPU_GRAPH_OP_HANDLERS.get(record.op_cache_entry.__name__)
                if handler is None:
                    raise RuntimeError(f"NPUGraph.update: no graph handler is registered for "
                                       f"{record.op_cache_entry.__name__} any more")
                for key, value in update.items():
                    if key in record.kwargs:
                        record.kwargs[key] = value
                handler.update_args(record, update)
                graph_task_update_begin(updater, record.handle)
                try:
                    result = record.op_cache_entry(*record.args, **record.kwargs)
                    fresh = [t for t in torch.utils._pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
                    for out, new in zip(record.outputs, fresh):
                        out.copy_(new)
                finally:
                    graph_task_update_end(updater)
                record.keep = fresh
        # Replays launched on the caller's stream from now on run the new tasks.
        caller.wait_stream(updater)


class NPUGraph(_C._NPUGraph):
    """A graph of the work launched on one stream between ``capture_begin`` and ``capture_end``;
    ``replay`` runs it again on the same memory (inputs are read from, and outputs written to, the
    tensors the capture used). Allocations during capture come from the graph's private pool."""

    def __init__(self, keep_graph=False):
        super().__init__()
        self.graph_dispatch_mode = _GraphDispatchMode()

    def update(self, cpu_update_input):
        """New values for the ops recorded with auto_dispatch_capture: a list with one dict per
        recorded op (or one dict for all), e.g. ``[{"actual_seq_lengths": [100]}]``. Replays on the
        current stream after this call compute with them, into the same output tensors."""
        self.graph_dispatch_mode.update(cpu_update_input)

    def capture_begin(self, pool=None, capture_error_mode="global"):
        """Begins capturing the current stream (not the default one). ``pool``: another graph's
        ``pool()`` or a ``graph_pool_handle()`` to share memory with; ``capture_error_mode``:
        "global", "thread_local" or "relaxed" (which synchronising calls break the capture)."""
        super().capture_begin(pool=pool, capture_error_mode=capture_error_mode)

    def capture_end(self):
        super().capture_end()

    def replay(self):
        super().replay()

    def reset(self):
        super().reset()

    def pool(self):
        return super().pool()

    def enable_debug_mode(self):
        super().enable_debug_mode()

    def debug_dump(self, debug_path):
        """Writes the captured tasks, one per line, to ``debug_path``."""
        super().debug_dump(debug_path)

    def super_kernel_optimize(self, optimize_options=None, debug_options=None):
        """Ascend's whole-graph kernel fusion. A replay here already runs the whole graph as one task,
        which is what the fusion buys on hardware; the options are checked (as upstream names and
        types them) and kept in ``super_kernel_options``."""
        _check_super_kernel_options("optimize_options", optimize_options)
        _check_super_kernel_options("debug_options", debug_options)
        self.super_kernel_options = {"optimize_options": optimize_options, "debug_options": debug_options}

    def instantiate(self):
        """Graphs are ready to replay when their capture ends; nothing left to do."""


class graph:
    """Context manager that captures the work of its body into ``npu_graph``.

    On entry it synchronises the device, collects garbage and empties the cache, then makes
    ``stream`` (default: a side stream shared by all ``graph`` objects) current and begins the
    capture; on exit it ends the capture and restores the stream."""

    default_capture_stream: typing.Optional[Stream] = None

    def __init__(self, npu_graph, pool=None, stream=None, auto_dispatch_capture=False,
                 capture_error_mode: str = "global"):
        if not isinstance(npu_graph, _C._NPUGraph):
            raise TypeError(f"torch.npu.graph expects a torch.npu.NPUGraph, got {type(npu_graph).__name__}")
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.stream_ctx = _stream_ctx(self.capture_stream)
        self.npu_graph = npu_graph
        self.capture_error_mode = capture_error_mode
        self.auto_dispatch_capture = auto_dispatch_capture
        if auto_dispatch_capture and not isinstance(npu_graph, NPUGraph):
            raise TypeError("auto_dispatch_capture=True needs a torch.npu.NPUGraph")

    def __enter__(self):
        torch.npu.synchronize()
        gc.collect()
        torch.npu.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.npu_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise
        if self.auto_dispatch_capture:
            self.npu_graph.graph_dispatch_mode.records.clear()
            self.npu_graph.graph_dispatch_mode.__enter__()

    def __exit__(self, exc_type, exc, tb):
        if self.auto_dispatch_capture:
            self.npu_graph.graph_dispatch_mode.__exit__(exc_type, exc, tb)
        try:
            self.npu_graph.capture_end()
        except RuntimeError:
            # The body's own exception says what went wrong; the capture it broke is just over.
            if exc_type is None:
                raise
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)
        return False


def _flatten(tree):
    return torch.utils._pytree.tree_flatten(tree)


def make_graphed_callables(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    """Graphed versions of ``callables`` (functions or ``torch.nn.Module``s): each call copies its
    inputs into the captured input tensors, replays the forward graph, and its backward replays a
    captured backward graph (torch.cuda.make_graphed_callables' contract: tensor arguments only,
    fixed shapes, dtypes and requires_grad; no hooks on graphed modules)."""
    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`.")
    just_one = False
    if not isinstance(callables, tuple):
        just_one = True
        callables = (callables,)
        sample_args = (sample_args,)

    flat_sample_args = []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            if len(c._backward_hooks) or len(c._forward_hooks) or len(c._forward_pre_hooks):
                raise RuntimeError(
                    "Modules must not have hooks registered at the time they are passed. However, registering "
                    "hooks on modules after passing them through make_graphed_callables is allowed.")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError("In any Module passed to make_graphed_callables, parameters may be trainable. "
                                   "All buffers must have requires_grad=False.")
        flat, _ = _flatten(args)
        flat_sample_args.append(tuple(flat))
        if not all(isinstance(a, torch.Tensor) for a in flat):
            raise TypeError("In the beta API, sample_args for each callable must contain only Tensors. "
                            "Other types are not allowed.")

    per_callable_len_user_args = [len(args) for args in flat_sample_args]
    per_callable_module_params = [tuple(c.parameters()) if isinstance(c, torch.nn.Module) else ()
                                  for c in callables]
    per_callable_static_input_surfaces = [flat_sample_args[i] + per_callable_module_params[i]
                                          for i in range(len(callables))]
    fwd_graphs = [NPUGraph() for _ in callables]
    bwd_graphs = [NPUGraph() for _ in callables]
    mempool = graph_pool_handle() if pool is None else pool

    # Warm up on a side stream (lazy initialisation, autograd's first-use work) before capturing.
    torch.npu.synchronize()
    with _stream_ctx(Stream()):
        for func, args, static_input_surface in zip(callables, sample_args, per_callable_static_input_surfaces):
            grad_inputs, outputs, outputs_grad = None, None, None
            for _ in range(num_warmup_iters):
                outputs, _ = _flatten(func(*args))
                outputs_grad = tuple(o for o in outputs if o.requires_grad)
                if len(outputs_grad) > 0:
                    grad_inputs = torch.autograd.grad(
                        outputs=outputs_grad,
                        inputs=tuple(i for i in static_input_surface if i.requires_grad),
                        grad_outputs=tuple(torch.empty_like(o) for o in outputs if o.requires_grad),
                        only_inputs=True,
                        allow_unused=allow_unused_input)
            for v in [outputs, outputs_grad, grad_inputs]:
                del v
    torch.npu.synchronize()

    # Forward graphs, in order, sharing one pool.
    per_callable_static_outputs = []
    per_callable_output_unflatten_spec = []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            outputs = func(*args)
        flat_outputs, spec = _flatten(outputs)
        per_callable_static_outputs.append(tuple(flat_outputs))
        per_callable_output_unflatten_spec.append(spec)

    # Backward graphs, in reverse order (the order autograd runs them).
    per_callable_static_grad_outputs = []
    per_callable_static_grad_inputs = []
    for static_input_surface, static_outputs, bwd_graph in zip(
            reversed(per_callable_static_input_surfaces), reversed(per_callable_static_outputs),
            reversed(bwd_graphs)):
        static_grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs)
        outputs_grad = tuple(o for o in static_outputs if o.requires_grad)
        grad_inputs = None
        if len(outputs_grad) > 0:
            with graph(bwd_graph, pool=mempool):
                grad_inputs = torch.autograd.grad(
                    outputs=outputs_grad,
                    inputs=tuple(i for i in static_input_surface if i.requires_grad),
                    grad_outputs=tuple(o for o in static_grad_outputs if o is not None),
                    only_inputs=True,
                    allow_unused=allow_unused_input)
        static_grad_inputs = []
        grad_idx = 0
        for arg in static_input_surface:
            if arg.requires_grad and grad_inputs is not None:
                static_grad_inputs.append(grad_inputs[grad_idx])
                grad_idx += 1
            else:
                static_grad_inputs.append(None)
        per_callable_static_grad_outputs.append(static_grad_outputs)
        per_callable_static_grad_inputs.append(tuple(static_grad_inputs))
    per_callable_static_grad_outputs.reverse()
    per_callable_static_grad_inputs.reverse()

    def make_graphed_autograd_function(fwd_graph, bwd_graph, module_params, len_user_args, output_unflatten_spec,
                                       static_input_surface, static_outputs, static_grad_outputs,
                                       static_grad_inputs):
        class Graphed(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *inputs):
                for i in range(len_user_args):
                    if static_input_surface[i].data_ptr() != inputs[i].data_ptr():
                        static_input_surface[i].copy_(inputs[i])
                fwd_graph.replay()
                assert isinstance(static_outputs, tuple)
                return tuple(o.detach() for o in static_outputs)

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx, *grads):
                assert len(grads) == len(static_grad_outputs)
                for g, grad in zip(static_grad_outputs, grads):
                    if g is not None and g.data_ptr() != grad.data_ptr():
                        g.copy_(grad)
                bwd_graph.replay()
                assert isinstance(static_grad_inputs, tuple)
                return tuple(b.detach() if b is not None else b for b in static_grad_inputs)

        def functionalized(*user_args):
            flat_user_args, _ = _flatten(user_args)
            out = Graphed.apply(*(tuple(flat_user_args) + module_params))
            return torch.utils._pytree.tree_unflatten(out, output_unflatten_spec)

        return functionalized

    ret = []
    for i, func in enumerate(callables):
        graphed = make_graphed_autograd_function(
            fwd_graphs[i], bwd_graphs[i], per_callable_module_params[i], per_callable_len_user_args[i],
            per_callable_output_unflatten_spec[i], per_callable_static_input_surfaces[i],
            per_callable_static_outputs[i], per_callable_static_grad_outputs[i],
            per_callable_static_grad_inputs[i])
        if isinstance(func, torch.nn.Module):
            def make_graphed_forward(func, graph_training_state, graphed, orig_fwd):
                def new_fwd(*user_args):
                    # Graphed only in the training state it was captured in; otherwise eager.
                    if func.training == graph_training_state:
                        return graphed(*user_args)
                    return orig_fwd(*user_args)
                return new_fwd

            func.forward = make_graphed_forward(func, func.training, graphed, func.forward)
            ret.append(func)
        else:
            ret.append(graphed)
    if just_one:
        return ret[0]
    return tuple(ret)

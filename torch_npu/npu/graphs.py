"""NPU graphs: capture the work launched on a stream once and replay it (torch.cuda.graphs' API on
npu, as torch_npu exposes it): NPUGraph, graph, make_graphed_callables, graph_pool_handle and
is_current_stream_capturing."""

import gc
import typing

import torch

from torch_npu import _C
from torch_npu.npu.streams import Stream, current_stream, stream as _stream_ctx

__all__ = [
    "NPUGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
]


def is_current_stream_capturing() -> bool:
    """True while the current npu stream is capturing a graph."""
    return _C._npu_isCurrentStreamCapturing()


def graph_pool_handle():
    """An id for a memory pool that several graphs share (pass it as ``pool=`` to each capture)."""
    return tuple(_C._graph_pool_handle())


class NPUGraph(_C._NPUGraph):
    """A graph of the work launched on one stream between ``capture_begin`` and ``capture_end``;
    ``replay`` runs it again on the same memory (inputs are read from, and outputs written to, the
    tensors the capture used). Allocations during capture come from the graph's private pool."""

    def __init__(self, keep_graph=False):
        super().__init__()

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

    def __exit__(self, exc_type, exc, tb):
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

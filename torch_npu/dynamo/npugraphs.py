"""mode="reduce-overhead" on npu: a compiled graph replayed through NPU graphs (torch.npu.NPUGraph);
and the "npugraphs" backend, which replays Dynamo's graph itself (eager ops, no Inductor).

Inductor's own CUDA-graph trees serve CUDA devices only; this wrapper gives npu compiles the same
effect. Each distinct set of input shapes, strides and dtypes is recorded once (after one warm-up
call) into an NPU graph whose static input buffers receive the call's inputs; later calls copy the
inputs in, replay, and return copies of the outputs. Calls it cannot graph run the compiled code
directly, and say why once (logged at INFO, and counted in `npugraph_stats`):

- an input lives on the CPU (a graph replays device memory only);
- autograd records the call (grad mode on and an input requires grad): only the forward would
  replay, so training steps run compiled but ungraphed;
- more than `MAX_RECORDINGS` input signatures (dynamic shapes re-record up to that many).
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

MAX_RECORDINGS = 8


class _Stats:
    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.recordings = 0  # graphs captured
        self.replays = 0
        self.skipped = {}  # reason -> calls run without a graph

    def __repr__(self) -> str:
        return f"npu graph stats: {self.recordings} recording(s), {self.replays} replay(s), skipped {self.skipped}"


npugraph_stats = _Stats()


class _Recording:
    """One captured signature: the graph, its static inputs (parameters and other inputs whose
    address stayed fixed are used in place) and its static outputs."""

    def __init__(self, compiled, args, pool):
        self.static_inputs = []
        self.copied = []  # indices of inputs copied in on every call
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and not isinstance(a, torch.nn.Parameter):
                self.static_inputs.append(a.detach().clone())
                self.copied.append(i)
            else:
                self.static_inputs.append(a)
        self.graph = torch.npu.NPUGraph()
        with torch.npu.graph(self.graph, pool=pool):
            outputs = compiled(*self.static_inputs)
        self.tuple_outputs = isinstance(outputs, (tuple, list))
        self.outputs = list(outputs) if self.tuple_outputs else [outputs]
        self.output_type = type(outputs) if self.tuple_outputs else None

    def __call__(self, args):
        for i in self.copied:
            self.static_inputs[i].copy_(args[i])
        self.graph.replay()
        # Copies: the next replay rewrites the static outputs, which callers may still hold.
        outs = [o.clone() if isinstance(o, torch.Tensor) else o for o in self.outputs]
        return self.output_type(outs) if self.tuple_outputs else outs[0]


def _signature(args):
    return tuple((tuple(a.shape), a.stride(), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a)
                 for a in args)


class NPUGraphCallable:
    """Calls `compiled` through NPU graphs (see the module docstring)."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.recordings = {}
        self.warmed = set()
        self.pool = None
        self.logged = set()

    def __call__(self, *args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if any(t.device.type != "npu" for t in tensors if t.dim() > 0):
            return self._call_plain("an input is on the CPU (graphs replay device memory only)", args)
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return self._call_plain("autograd records this call (graphs replay the forward only; run inference "
                                    "under torch.no_grad())", args)
        key = _signature(args)
        recording = self.recordings.get(key)
        if recording is None:
            if len(self.recordings) >= MAX_RECORDINGS:
                return self._call_plain(f"more than {MAX_RECORDINGS} input signatures (dynamic shapes)", args)
            if key not in self.warmed:
                # One plain call first: lazy initialisation and kernel loading happen outside capture.
                self.warmed.add(key)
                return self._call_plain(None, args)
            if self.pool is None:
                self.pool = torch.npu.graph_pool_handle()
            recording = _Recording(self._invoke, list(args), self.pool)
            self.recordings[key] = recording
            npugraph_stats.recordings += 1
        npugraph_stats.replays += 1
        return recording(args)

    def _invoke(self, *args):
        return self.compiled(*args)

    def _call_plain(self, reason, args):
        if reason is not None:
            npugraph_stats.skipped[reason] = npugraph_stats.skipped.get(reason, 0) + 1
            if reason not in self.logged:
                self.logged.add(reason)
                log.info("npu reduce-overhead: running without an NPU graph: %s", reason)
        return self._invoke(*args)


def npugraphs_backend(gm: torch.fx.GraphModule, example_inputs):
    """`torch.compile(model, backend="npugraphs")`: Dynamo's graph run by its own eager ops, replayed
    through NPU graphs as reduce-overhead does (same recordings, same reasons to run ungraphed)."""
    return NPUGraphCallable(gm)

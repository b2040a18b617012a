"""Ops whose captured arguments NPUGraph.update() can change (torch.npu.graph(..., auto_dispatch_capture=True)).

While a graph captures with automatic dispatch capture, every call of a registered op is recorded as a
task group of its own (graph_task_group_begin / end). ``NPUGraph.update(cpu_update_input)`` then
launches the op again with the new values on an update stream, recording its tasks as the group's
new tasks, followed by copies of its results into the tensors the capture returned, so that replays
compute with the new values into the same outputs.

A handler is a class of classmethods (no instances), registered for the op names its calls dispatch
as (``func.__name__``: "npu_fused_infer_attention_score.default", ...). ``UPDATE_SPECS`` maps an op
name to the (place, where, update key) triples ``update_args`` applies: ("arg", i, key) is the op
schema's i-th argument (passed positionally or, for keyword-only ones, by name), ("kwarg", name, key)
a keyword argument.
"""

import copy

import torch

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]

_NPU_GRAPH_OP_HANDLERS = {}


class NpuGraphOpHandler:
    """Base class of the handlers: the defaults record the call as it is and update by UPDATE_SPECS."""

    UPDATE_SPECS = {}

    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        """(func, args, kwargs) to record: a handler may swap the overload or pre-allocate outputs."""
        return func, args, kwargs

    @classmethod
    def postprocess_result(cls, result, kwargs):
        """What the caller gets back from the recorded call."""
        return result

    @classmethod
    def get_update_specs(cls, op_name):
        return cls.UPDATE_SPECS.get(op_name, [])

    @classmethod
    def update_args(cls, dispatch_record, update_input):
        """Writes the values of ``update_input`` into the recorded args / kwargs named by UPDATE_SPECS."""
        schema = dispatch_record.op_cache_entry._schema.arguments
        for place, where, key in cls.get_update_specs(dispatch_record.op_cache_entry.__name__):
            if key not in update_input:
                continue
            if place == "arg":
                if where < len(dispatch_record.args):
                    dispatch_record.args[where] = update_input[key]
                elif where < len(schema):  # a keyword-only argument (dispatch passes those by name)
                    dispatch_record.kwargs[schema[where].name] = update_input[key]
            elif place == "kwarg":
                dispatch_record.kwargs[where] = update_input[key]
            else:
                raise ValueError(f"UPDATE_SPECS place must be 'arg' or 'kwarg', got {place!r}")

    @classmethod
    def record_wrap_kwarg(cls, key, value, tensor_param_names):
        """The value a record keeps for a kwarg: tensors as they are (the graph uses their memory),
        everything else copied (the caller may mutate a list it passed)."""
        if value is None or isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(v if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in value)
        return copy.deepcopy(value)


def register_npu_graph_handler(op_names):
    """Class decorator: registers the handler class for ``op_names`` (a name or a list of names)."""
    names = [op_names] if isinstance(op_names, str) else list(op_names)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"register_npu_graph_handler expects op names, got {op_names!r}")

    def register(handler_cls):
        if not (isinstance(handler_cls, type) and issubclass(handler_cls, NpuGraphOpHandler)):
            raise TypeError("register_npu_graph_handler decorates subclasses of NpuGraphOpHandler")
        for name in names:
            _NPU_GRAPH_OP_HANDLERS[name] = handler_cls
        return handler_cls

    return register


# Schema positions: query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv.
_SEQ_LENGTH_SPECS = [("arg", 5, "actual_seq_lengths"), ("arg", 6, "actual_seq_lengths_kv")]


@register_npu_graph_handler(["npu_fused_infer_attention_score", "npu_fused_infer_attention_score.default",
                             "npu_incre_flash_attention", "npu_incre_flash_attention.default",
                             "npu_prompt_flash_attention", "npu_prompt_flash_attention.default"])
class _AttentionSeqLengthsHandler(NpuGraphOpHandler):
    """Inference attention: decoding steps change the sequence lengths, not the shapes."""

    UPDATE_SPECS = {
        **{name: _SEQ_LENGTH_SPECS for name in (
            "npu_fused_infer_attention_score", "npu_fused_infer_attention_score.default")},
        **{name: [("kwarg", "actual_seq_lengths", "actual_seq_lengths"),
                  ("kwarg", "actual_seq_lengths_kv", "actual_seq_lengths_kv")] for name in (
            "npu_prompt_flash_attention", "npu_prompt_flash_attention.default")},
        # npu_incre_flash_attention(query, key, value, *, padding_mask, atten_mask, actual_seq_lengths, ...)
        **{name: [("kwarg", "actual_seq_lengths", "actual_seq_lengths")] for name in (
            "npu_incre_flash_attention", "npu_incre_flash_attention.default")},
    }

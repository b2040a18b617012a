"""The npugraph_ex backend and its pattern replacements (re-exported by torch_npu.npu.npugraph_ex)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._inductor.pattern_matcher import PatternMatcherPass, fwd_only


# The replacements of register_replacement, applied to every npugraph_ex compile's post-grad graph
# before Inductor lowers it.
_patterns = PatternMatcherPass(pass_name="npugraph_ex")
_pattern_keys = []  # what identifies each registered replacement (its functions' code)


def _function_key(fn) -> str:
    import hashlib
    import inspect

    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = getattr(fn, "__qualname__", repr(fn))
    return hashlib.sha256(text.encode()).hexdigest()


class _ReplacementPass(CustomGraphPass):
    """Applies the registered replacements (a CustomGraphPass, so Inductor's cache keys on them)."""

    def __call__(self, graph) -> None:
        _patterns.apply(graph)

    def uuid(self):
        # Inductor's cache keys on this: the same replacements give the same key in every process.
        return ("npugraph_ex", tuple(_pattern_keys))


def _return_true(match) -> bool:
    return True


def register_replacement(search_fn, replace_fn, example_inputs: Iterable[Any], trace_fn=fwd_only,
                         extra_check: Callable = _return_true, search_fn_pattern=None,
                         scalar_workaround: Optional[dict] = None, skip_duplicates: bool = False):
    """Rewrites every match of `search_fn` (traced with `example_inputs`) into `replace_fn` in the
    graphs npugraph_ex compiles from now on (Inductor's pattern matcher)."""
    from torch._inductor.pattern_matcher import register_replacement as _register

    registered = _register(search_fn, replace_fn, list(example_inputs), trace_fn, _patterns, extra_check=extra_check,
                           scalar_workaround=scalar_workaround, search_fn_pattern=search_fn_pattern,
                           skip_duplicates=skip_duplicates)
    _pattern_keys.append(_function_key(search_fn) + _function_key(replace_fn))
    return registered


def compile_fx(gm, example_inputs=None, options=None):
    """The npugraph_ex backend: `torch.compile(model, backend="npugraph_ex", options={...})`."""
    from torch_npu.dynamo.backend import npu_backend

    patches = dict(options or {})
    if _pattern_keys:
        patches.setdefault("post_grad_custom_pre_pass", _ReplacementPass())
    return npu_backend(gm, example_inputs, mode="reduce-overhead", options=patches)

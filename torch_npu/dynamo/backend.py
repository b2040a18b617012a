"""The "npu" torch.compile backend: AOTAutograd + Inductor with npu kernels, and torchair converters.

`torch.compile(model, backend="npu")` and `torchair.get_npu_backend(compiler_config=...)` both end
here. The graph is compiled by Inductor's `compile_fx` (forward and backward through AOTAutograd),
with the settings npu needs (below) scoped to this compile, and the converter pass (converters.py)
run on every post-grad graph.
"""

from __future__ import annotations

import logging
import os
import time

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from torch_npu.dynamo import converters

log = logging.getLogger(__name__)

# Inductor (2.13) decides some codegen questions by "is the device cpu?"; npu runs the same C++
# codegen, so these settings give npu graphs the answers cpu graphs get:
# - get_current_backend() answers config.cuda_backend for devices it does not know; npu's is "cpp".
# - Loop re-indexing and index inversion during fusion are only validated for SIMD (GPU) kernels and
#   are skipped for cpu.
# - Buffers are realized at the cpu thresholds (larger fused kernels suit C++ loops).
# - No channels-last layout optimisation: PyTorch predicts contiguous convolution outputs for npu
#   (its "Overrideable" conv backend), while npu's convolution, like the CPU's, keeps a channels-last
#   input's layout; converting activations to channels-last would make the two disagree.
NPU_INDUCTOR_CONFIG = {
    "layout_optimization": False,
    "cuda_backend": "cpp",
    "loop_reindexing_after_fusion": False,
    "loop_index_inversion_in_fusion": False,
    "realize_opcount_threshold": 50,
    "realize_acc_reads_threshold": 12,
}



def _format_cast_in_graph(self, acl_format, customize_dtype=None, input_dtype=None):
    # A compiled graph computes on base formats (its kernels read storages as strided memory), so a
    # format cast inside it is a copy: the same values, which is all a format changes.
    return torch.clone(self, memory_format=torch.contiguous_format)


_NPU_DECOMPOSITIONS = {}  # filled on first use (the npu ops must be registered first)


def _npu_own_decompositions() -> dict:
    if not _NPU_DECOMPOSITIONS:
        _NPU_DECOMPOSITIONS[torch.ops.npu.npu_format_cast.default] = _format_cast_in_graph
    return _NPU_DECOMPOSITIONS


def register_npu_decompositions() -> None:
    """Adds npu's decompositions to Inductor's default table (once). Compiles then pass no table of
    their own, which keeps Inductor's FX graph cache (and torch.compiler's cache artifacts) usable: a
    table passed to compile_fx is part of the cache key, and Inductor's own table cannot be pickled."""
    from torch._inductor import decomposition

    missing = {op: fn for op, fn in _npu_own_decompositions().items() if op not in decomposition.decompositions}
    if missing:
        decomposition.decompositions.update(missing)
        decomposition.fast_random_decomps.cache_clear()  # a cached copy of the table


def npu_decompositions(extra: dict | None = None) -> dict:
    """Inductor's decompositions plus npu's (and the caller's `extra`, which take precedence)."""
    from torch._inductor.decomposition import select_decomp_table

    table = dict(select_decomp_table())
    table.update(_npu_own_decompositions())
    table.update(extra or {})
    return table


# Mode options that only mean something for CUDA devices.
_CUDA_ONLY_OPTIONS = ("triton.cudagraphs", "coordinate_descent_tuning")


_CODEGEN_FILES = tuple(os.path.join(os.path.dirname(__file__), f) for f in sorted(os.listdir(os.path.dirname(__file__)))
                       if f.endswith(".py"))


class _ConverterPass(CustomGraphPass):
    """Post-grad pass: converted ops become device-op calls, then the user's own pass (if any) runs."""

    def __init__(self, user_pass=None, source_key: str = ""):
        self.user_pass = user_pass
        self.source_key = source_key

    def __call__(self, graph: torch.fx.Graph) -> None:
        converters.convert_graph(graph)
        if self.user_pass is not None:
            self.user_pass(graph)

    def uuid(self):
        user = self.user_pass.uuid() if hasattr(self.user_pass, "uuid") else self.user_pass
        if self.user_pass is not None and user is None:
            return None
        # torch_npu's codegen is part of the compiled code: a new version must not reuse cached graphs.
        # The user's source lines are written into the generated code (error attribution).
        return (get_hash_for_files(_CODEGEN_FILES, converters.registry_key() + "|" + self.source_key), user)


class _Stats:
    """Compile time and kernel counts of the graphs compiled so far (read by the benchmarks)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.graphs = 0  # graphs handed to the backend (Dynamo graphs; forward and backward count once)
        self.seconds = 0.0  # time spent in the backend (the forward's compile; the backward compiles later)
        self.kernels = 0  # npu kernels loaded (from fresh compiles or Inductor's cache)

    def __repr__(self) -> str:
        return f"npu compile stats: {self.graphs} graph(s), {self.kernels} kernel(s), {self.seconds:.2f} s"


compile_stats = _Stats()


def inductor_patches(mode: str | None = None, options: dict | None = None, dynamic=None, source_key: str = "") -> dict:
    patches = dict(NPU_INDUCTOR_CONFIG)
    if mode not in (None, "default"):
        from torch._inductor import list_mode_options

        mode_options = dict(list_mode_options(mode, dynamic))
        dropped = [k for k in _CUDA_ONLY_OPTIONS if mode_options.pop(k, False)]
        if dropped:
            log.info("npu: mode=%r: %s apply to CUDA devices only", mode, ", ".join(dropped))
        patches.update(mode_options)
    if options:
        patches.update(options)
    user_pass = patches.get("post_grad_custom_post_pass", torch._inductor.config.post_grad_custom_post_pass)
    patches["post_grad_custom_post_pass"] = _ConverterPass(user_pass, source_key)
    return patches


def _dump_graph(gm: torch.fx.GraphModule, compiler_config) -> None:
    dump = compiler_config.debug.graph_dump
    if dump.type.value is None:
        return
    directory = dump.path.value or "."
    os.makedirs(directory, exist_ok=True)
    stamp = time.strftime("%Y%m%d%H%M%S")
    path = os.path.join(directory, f"dynamo_graph_{compiler_config._next_dump_index()}_{stamp}.{dump.type.value}")
    text = gm.print_readable(print_output=False) if dump.type.value == "py" else str(gm.graph)
    with open(path, "w") as f:
        f.write(text)
    log.info("npu: graph dumped to %s", path)


def npu_backend(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None, options: dict | None = None,
                compiler_config=None, decompositions: dict | None = None):
    """torch.compile backend for npu (`backend="npu"`). `decompositions` are added to Inductor's."""
    from torch._inductor.compile_fx import compile_fx

    from torch_npu import _C
    from torch_npu.dynamo import register
    from torch_npu.dynamo.inductor import inductor_cache_dir, source_key

    register()
    # Errors in compiled code name the user's line, not the generated module's.
    _C._add_launch_site_library_prefix(inductor_cache_dir())
    if compiler_config is not None:
        _dump_graph(gm, compiler_config)
        if mode is None and compiler_config.mode.value == "reduce-overhead":
            mode = "reduce-overhead"
    start = time.perf_counter()
    try:
        register_npu_decompositions()
        decompositions = npu_decompositions(decompositions) if decompositions else None
        patches = inductor_patches(mode, options, source_key=source_key(gm))
        compiled = compile_fx(gm, example_inputs, config_patches=patches,
                              decompositions=decompositions)
        if mode == "reduce-overhead" or (options or {}).get("triton.cudagraphs"):
            # Inductor's CUDA-graph trees serve CUDA only: npu replays through NPU graphs instead.
            from torch_npu.dynamo.npugraphs import NPUGraphCallable

            return NPUGraphCallable(compiled)
        return compiled
    finally:
        compile_stats.graphs += 1
        compile_stats.seconds += time.perf_counter() - start

"""torchair: torch_npu's graph-mode API (torch.compile on npu with device-op converters).

    import torchair
    from torchair.configs.compiler_config import CompilerConfig
    backend = torchair.get_npu_backend(compiler_config=CompilerConfig())
    model = torch.compile(model, backend=backend)

Ops with a converter (`register_fx_node_ge_converter`) run as the named device op inside the compiled
graph; the rest lower through Inductor (docs/graph_mode.md).
"""

import functools

import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu.dynamo.converters import register_fx_node_ge_converter

from torchair import ge
from torchair.configs.compiler_config import CompilerConfig

__all__ = ["CompilerConfig", "get_compiler", "get_npu_backend", "ge", "register_fx_node_ge_converter"]


def get_npu_backend(*, compiler_config: CompilerConfig | None = None, custom_decompositions=None):
    """The torch.compile backend for npu with `compiler_config` (a CompilerConfig; default settings
    when None). `custom_decompositions` ({op: fn}) are applied before lowering."""
    from torch_npu.dynamo.backend import npu_backend

    config = compiler_config if compiler_config is not None else CompilerConfig()
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"compiler_config must be a torchair CompilerConfig, got {type(config).__name__}")
    backend = functools.partial(npu_backend, compiler_config=config,
                                decompositions=dict(custom_decompositions) if custom_decompositions else None)
    backend.__name__ = "npu_backend"
    backend.compiler_config = config
    return backend


def get_compiler(compiler_config: CompilerConfig | None = None):
    """torchair's compiler entry (used with aot_autograd by advanced users): the npu backend."""
    return get_npu_backend(compiler_config=compiler_config)

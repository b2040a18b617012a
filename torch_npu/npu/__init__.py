"""torch.npu: the device module for npu (mirrors torch.cuda's API)."""

import sys as _sys

from torch_npu.npu.device import (
    _get_device_index,
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_device_status,
    init,
    is_available,
    is_initialized,
    set_device,
    synchronize,
    utilization,
    _is_in_bad_fork,
    _lazy_init,
)
from torch_npu.npu.streams import (
    Event,
    ExternalEvent,
    Stream,
    SyncLaunchStream,
    current_stream,
    default_stream,
    set_stream,
    stream,
    StreamContext,
    get_sync_debug_mode,
    set_sync_debug_mode,
)
from torch_npu.npu.memory import (
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    empty_virt_addr_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_empty_cache,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    ipc_collect,
    memory_stats_as_nested_dict,
    reset_accumulated_host_memory_stats,
    reset_peak_host_memory_stats,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    MemPool,
    use_mem_pool,
)
from torch_npu.npu.random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from torch_npu.npu.format_config import config
from torch_npu.npu.autocast_utils import (
    get_autocast_dtype,
    is_autocast_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from torch_npu.npu.storages import (
    BFloat16Storage,
    BoolStorage,
    ByteStorage,
    CharStorage,
    DoubleStorage,
    FloatStorage,
    HalfStorage,
    IntStorage,
    LongStorage,
    ShortStorage,
)
from torch_npu.npu.tensor_types import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)


def op_stats(reset: bool = False) -> dict:
    """How each op ran on npu so far: {"aten::add.out": {"device_op": n, "generic": n,
    "generic_inline": n, "fallback": n}}. `reset=True` clears the counters after reading."""
    from torch_npu import _C

    stats = _C._op_stats()
    if reset:
        _C._reset_op_stats()
    return stats


def get_amp_supported_dtype():
    """dtypes torch.autocast("npu") may cast to."""
    import torch

    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the reported SoC computes bfloat16 (Ascend910B and later, the default Ascend910B1)."""
    from torch_npu import _C

    return is_available() and _C._is_bf16_supported()


from torch_npu.npu.npu_config import (  # noqa: E402
    CubeMathType,
    are_compatible_impl_enabled,
    conv,
    get_device_limit,
    get_mm_bmm_format_nd,
    get_stream_limit,
    is_jit_compile_false,
    matmul,
    reset_stream_limit,
    set_aoe,
    set_compile_mode,
    set_device_limit,
    set_mm_bmm_format_nd,
    set_option,
    set_stream_limit,
    use_compatible_impl,
)
from torch_npu.npu.utils import get_cann_version, get_soc_version, is_support_inf_nan, npurt  # noqa: E402
from torch_npu.npu.utils import (  # noqa: E402
    check_uce_in_memory,
    current_blas_handle,
    set_op_timeout_ms,
    stress_detect,
)
from torch_npu.npu import utils  # noqa: E402


from torch_npu.npu.profiler import (  # noqa: E402  (seed-era E2E profilers: torch.npu.profile, prof_init, ...)
    iteration_end,
    iteration_start,
    prof_finalize,
    prof_init,
    prof_start,
    prof_stop,
    profile,
    profileConfig,
)
from torch_npu.npu import dump as _dump  # noqa: E402
from torch_npu.npu.dump import finalize_dump, init_dump, set_dump  # noqa: E402
from torch_npu.npu import _acl_config  # noqa: E402

# (torch_npu.npu.device is the device class here; the module is reached through sys.modules.)
_sys.modules["torch_npu.npu.device"]._first_use_hooks.append(_acl_config.apply)  # ACL_OP_INIT_MODE, TORCH_ACL_INIT_CONFIG_PATH
from torch_npu.npu.utils import clear_npu_overflow_flag, get_npu_overflow_flag, npu_check_overflow  # noqa: E402
from torch_npu.npu import _gpu_trace, _sanitizer  # noqa: E402,F401  (the stream-race checker)
from torch_npu.npu import memory  # noqa: E402  (torch.npu.memory._record_memory_history, ...)
from torch_npu.npu import aclnn  # noqa: E402,F401  (torch.npu.aclnn.allow_hf32, flags())
from torch_npu.npu.deterministic import (  # noqa: E402
    _get_deterministic_level,
    disable_deterministic_with_backward,
    enable_deterministic_with_backward,
    set_deterministic_level,
)
from torch_npu.npu.backends import (  # noqa: E402
    enable_flash_sdp,
    enable_math_sdp,
    enable_mem_efficient_sdp,
    flash_sdp_enabled,
    math_sdp_enabled,
    mem_efficient_sdp_enabled,
    preferred_linalg_library,
    sdp_kernel,
)
from torch_npu.npu import graphs  # noqa: E402
from torch_npu.npu.graphs import (  # noqa: E402
    NPUGraph,
    NpuGraphOpHandler,
    graph,
    graph_pool_handle,
    graph_task_group_begin,
    graph_task_group_end,
    graph_task_update_begin,
    graph_task_update_end,
    register_npu_graph_handler,
    super_kernel_scope_begin,
    super_kernel_scope_end,
    is_current_stream_capturing,
    make_graphed_callables,
)
from torch_npu.npu.mstx import mstx  # noqa: E402  (the class, as torch_npu binds it; the module stays importable)
from torch_npu.npu import amp  # noqa: E402  (torch.npu.amp; imports torch_npu.npu, so it comes last)

# `import torch.npu.amp` / `from torch.npu.amp import GradScaler` find this module instead of loading a
# second copy under another name.
_sys.modules.setdefault("torch.npu.amp", amp)
_sys.modules.setdefault("torch.npu.utils", utils)
_dump._from_env()


__all__ = [name for name in dir() if not name.startswith("_")]


# Attributes a layer above this package supplies on first use: Inductor's PrivateUse1 hook asks the
# device module for its codegen classes on the first compile, and torch_npu.dynamo (which imports
# this package, not the other way round) registers the function that answers.
_attribute_providers = {}


def _provide_attributes(names, provider) -> None:
    """Has `torch.npu.<name>` answered by `provider(name)` for each of `names`."""
    for name in names:
        _attribute_providers[name] = provider


def __getattr__(name):
    provider = _attribute_providers.get(name)
    if provider is not None:
        return provider(name)
    raise AttributeError(f"module 'torch.npu' has no attribute {name!r}")

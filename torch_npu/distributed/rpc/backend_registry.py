"""The NPU_TENSORPIPE RPC backend (rpc.BackendType.NPU_TENSORPIPE): torch.distributed.rpc's TensorPipe
agent configured by NPUTensorPipeRpcBackendOptions.

Tensors travel through TensorPipe's CPU channels: the software NPU's device memory has no transport
of its own, so a worker sends npu tensors as CPU tensors (``.cpu()``) and moves what it receives to
its device (``.npu()``); options with `devices` or `device_maps` are refused with that explanation
instead of failing inside the agent."""

import torch.distributed.rpc as rpc
from torch.distributed.rpc import backend_registry as _registry

__all__ = []

BACKEND_NAME = "NPU_TENSORPIPE"


def _construct_options(rpc_timeout, init_method, num_worker_threads=rpc.constants.DEFAULT_NUM_WORKER_THREADS,
                       _transports=None, _channels=None, **kwargs):
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    return NPUTensorPipeRpcBackendOptions(rpc_timeout=rpc_timeout, init_method=init_method,
                                          num_worker_threads=num_worker_threads, _transports=_transports,
                                          _channels=_channels, **kwargs)


def _init_backend(store, name, rank, world_size, rpc_backend_options):
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    if not isinstance(rpc_backend_options, NPUTensorPipeRpcBackendOptions):
        raise TypeError(f"the {BACKEND_NAME} backend takes NPUTensorPipeRpcBackendOptions, got "
                        f"{type(rpc_backend_options).__name__}")
    if rpc_backend_options.devices or any(rpc_backend_options.device_maps.values()):
        raise ValueError(
            f"{BACKEND_NAME}: RPC on the software NPU sends tensors through CPU channels, so `devices` and "
            "`device_maps` cannot be honoured; leave them empty, send npu tensors as .cpu() and move received "
            "tensors to the device with .npu()")
    cpu_options = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=rpc_backend_options.num_worker_threads, rpc_timeout=rpc_backend_options.rpc_timeout,
        init_method=rpc_backend_options.init_method, _transports=rpc_backend_options._transports,
        _channels=rpc_backend_options._channels)
    return _registry._tensorpipe_init_backend_handler(store, name, rank, world_size, cpu_options)


def register() -> None:
    if not _registry.backend_registered(BACKEND_NAME):
        _registry.register_backend(BACKEND_NAME, _construct_options, _init_backend)
    # register_backend makes a new BackendType enum; torch.distributed.rpc's name follows it.
    rpc.BackendType = _registry.BackendType

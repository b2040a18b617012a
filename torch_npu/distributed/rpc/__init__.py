"""torch_npu.distributed.rpc: the NPU_TENSORPIPE backend of torch.distributed.rpc
(``rpc.init_rpc(..., backend=rpc.BackendType.NPU_TENSORPIPE, rpc_backend_options=NPUTensorPipeRpcBackendOptions(...))``),
registered when torch_npu is imported."""

import torch.distributed.rpc as _rpc

from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

__all__ = ["NPUTensorPipeRpcBackendOptions"]

if _rpc.is_available():
    from torch_npu.distributed.rpc import backend_registry

    backend_registry.register()

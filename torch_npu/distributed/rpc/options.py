"""NPUTensorPipeRpcBackendOptions: TensorPipe RPC options whose `devices` and `device_maps` name npu
devices, checked as upstream checks them (npu devices only, one-to-one maps)."""

from typing import Dict, List, Optional, Union

import torch
from torch.distributed.rpc import constants as _constants
from torch._C._distributed_rpc import _TensorPipeRpcBackendOptionsBase

__all__ = ["NPUTensorPipeRpcBackendOptions"]

DeviceType = Union[int, str, torch.device]


def _npu_device(device: DeviceType) -> torch.device:
    device = torch.device("npu", device) if isinstance(device, int) else torch.device(device)
    if device.type != "npu":
        raise ValueError(f"NPUTensorPipeRpcBackendOptions: `devices` must be npu devices, got {device}")
    return device


def _device_map(device_map: Dict[DeviceType, DeviceType]) -> Dict[torch.device, torch.device]:
    mapped, sources = {}, {}
    for k, v in device_map.items():
        k, v = torch.device(k), torch.device(v)
        if v in sources:
            raise ValueError(f"NPUTensorPipeRpcBackendOptions: `device_map` only supports 1-to-1 mapping, trying "
                             f"to map {k} and {sources[v]} to {v}")
        mapped[k] = v
        sources[v] = k
    return mapped


class NPUTensorPipeRpcBackendOptions(_TensorPipeRpcBackendOptionsBase):
    """TensorPipeRpcBackendOptions for npu jobs (keyword-only, as upstream): `devices` lists the npu
    devices this worker sends and receives tensors on, `device_maps[worker]` maps this worker's
    devices to that worker's. Pass it as rpc_backend_options to torch.distributed.rpc.init_rpc."""

    def __init__(self, *, num_worker_threads: int = _constants.DEFAULT_NUM_WORKER_THREADS,
                 rpc_timeout: float = _constants.DEFAULT_RPC_TIMEOUT_SEC,
                 init_method: str = _constants.DEFAULT_INIT_METHOD,
                 device_maps: Optional[Dict[str, Dict[DeviceType, DeviceType]]] = None,
                 devices: Optional[List[DeviceType]] = None,
                 _transports: Optional[List] = None, _channels: Optional[List] = None):
        maps = {} if device_maps is None else {k: _device_map(v) for k, v in device_maps.items()}
        super().__init__(num_worker_threads, _transports, _channels, rpc_timeout, init_method, maps,
                         [] if devices is None else [_npu_device(d) for d in devices])
        self._transports, self._channels = _transports, _channels  # for the agent the backend builds

    def set_device_map(self, to: str, device_map: Dict[DeviceType, DeviceType]):
        """Maps this worker's devices to worker `to`'s (1-to-1, consistent with maps set before)."""
        mapped = _device_map(device_map)
        current = self.device_maps.get(to, {})
        for k, v in mapped.items():
            if k in current and current[k] != v:
                raise ValueError(f"NPUTensorPipeRpcBackendOptions: `set_device_map` only supports 1-to-1 mapping, "
                                 f"trying to map {k} to {v} and {current[k]}")
        self._set_device_map(to, mapped)

    def set_devices(self, devices: List[DeviceType]):
        """The npu devices this worker uses for RPC."""
        self.devices = [_npu_device(d) for d in devices]

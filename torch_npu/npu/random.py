"""npu random number generation: one default generator per device."""

import torch

from torch_npu import _C
from torch_npu.npu.device import _index, device_count


class _DefaultGenerators:
    """Sequence view of the per-device default generators (torch.npu.default_generators[i])."""

    def __len__(self):
        return device_count()

    def __getitem__(self, i):
        if not isinstance(i, int) or not -len(self) <= i < len(self):
            raise IndexError(f"npu:{i} does not exist: {len(self)} devices are configured")
        return _C._default_generator(i % len(self))

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _gen(device=None) -> torch.Generator:
    idx = _index(device)
    _C._check_device(idx)
    return _C._default_generator(idx)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    _gen().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _gen().seed()


def seed_all() -> None:
    s = _gen().seed()
    manual_seed_all(s)


def initial_seed() -> int:
    return _gen().initial_seed()


def get_rng_state(device="npu") -> torch.Tensor:
    return _gen(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="npu") -> None:
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("set_rng_state expects the uint8 tensor returned by get_rng_state()")
    _gen(device).set_state(new_state.cpu())


def get_rng_state_all() -> list:
    return [g.get_state() for g in default_generators]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)

"""`m`: the torch.library handle for Meta implementations of ops in the `npu` namespace.

Every built-in npu_* op already has one (generated from config/npu_native_functions.yaml). Ops added
outside torch_npu register theirs here, as torch_npu documents:

    from torch_npu.meta._meta_registrations import m
    from torch.library import impl

    @impl(m, "npu_add_custom")
    def npu_add_custom_meta(x, y):
        return torch.empty_like(x)
"""

import torch

m = torch.library.Library("npu", "IMPL", "Meta")

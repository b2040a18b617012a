"""torch_npu.multiprocessing: npu tensors, storages and events as torch.multiprocessing arguments and
queue items (reductions)."""

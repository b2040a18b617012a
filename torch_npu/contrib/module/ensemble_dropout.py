"""NpuCachedDropout (alias NpuFairseqDropout): dropout by torch_npu's bit masks, whose masks a model can
generate ahead of use on a stream of their own (enable_dropout_ensemble), so that the forward pass only
applies them."""

import torch

import torch_npu

__all__ = ["NpuCachedDropout", "NpuFairseqDropout"]


class _MaskPool:
    """Masks of one (shape, dtype, device, p), generated ahead; `used` counts this step's takes."""

    def __init__(self, shape, dtype, device, p):
        self.shape, self.dtype, self.device, self.p = shape, dtype, device, p
        self.masks = []
        self.used = 0

    def generate(self):
        return torch_npu.npu_dropout_gen_mask(self.shape, p=self.p, dtype=self.dtype, device=self.device)


class NpuCachedDropout(torch.nn.Dropout):
    """Dropout with probability `p` by npu_dropout_gen_mask / npu_dropout_do_mask (gradients through
    the same mask). forward(x) returns the dropped-out x (x itself in eval mode or with p = 0);
    forward([shape, dtype, device]) returns a mask for a tensor of that shape, to apply later with
    npu_dropout_do_mask.

    Without enable_dropout_ensemble each call generates its mask. With it, after every forward pass of
    `model` the masks the pass used are generated again on a side stream for the next pass, which the
    next pass waits for; torch_npu generates nothing on the first pass of a shape (and so drops
    nothing then), this module generates the mask it needs instead."""

    task_dict = {}
    dropout_stream = None

    def __init__(self, p, module_name=None):
        super().__init__(p)
        self.module_name = module_name

    def forward(self, x):
        if isinstance(x, torch.Tensor):
            shape, dtype, device, apply = tuple(x.shape), x.dtype, x.device, True
        elif isinstance(x, (list, tuple)) and len(x) == 3:
            shape, dtype, device = x
            shape, device, apply = tuple(shape), torch.device(device), False
        else:
            raise TypeError("NpuCachedDropout takes a tensor, or [shape, dtype, device] to get a mask for one; got "
                            f"{type(x).__name__}")
        if self.p == 0 or not self.training:
            return x if apply else None
        key = (shape, dtype, device, self.p)
        pool = NpuCachedDropout.task_dict.get(key)
        if pool is None:
            pool = NpuCachedDropout.task_dict[key] = _MaskPool(shape, dtype, device, self.p)
        pool.used += 1
        if pool.masks:
            mask = pool.masks.pop(0)
            mask.record_stream(torch.npu.current_stream(device))  # made on the side stream, used here
        else:
            mask = pool.generate()
        return torch_npu.npu_dropout_do_mask(x, mask, self.p)[0] if apply else mask

    @classmethod
    def enable_dropout_ensemble(cls, model):
        """Generate the masks `model`'s NpuCachedDropout modules use in a forward pass ahead of the next
        one, on a side stream."""
        if cls.dropout_stream is None:
            cls.dropout_stream = torch.npu.Stream()

        def wait_for_masks(module, inputs):
            torch.npu.current_stream().wait_stream(cls.dropout_stream)

        def generate_next_masks(module, inputs, outputs):
            cls.dropout_stream.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(cls.dropout_stream):
                for pool in cls.task_dict.values():
                    while len(pool.masks) < pool.used:
                        pool.masks.append(pool.generate())
                    pool.used = 0

        model.register_forward_pre_hook(wait_for_masks)
        model.register_forward_hook(generate_next_masks)


NpuFairseqDropout = NpuCachedDropout

"""Why a missed target is missed and what would fix it, per measurement key, and the method notes.

The report quotes these for the rows that miss their target in a given run; keep them in step with
what profiling shows (see the closing section of docs/benchmarks.md).
"""

# Keyed by row key; a key without an exact entry falls back to its section's entry.
WHY = {
    "small_ops": "TODO",
    "kernels": "TODO",
    "copies": "TODO",
    "training": "TODO",
    "allocator": "TODO",
}


def explain(key: str) -> str:
    if key in WHY:
        return WHY[key]
    return WHY.get(key.split(".")[0], "no analysis recorded for this measurement yet.")


METHOD = [
    "- Every npu sample ends with `torch.npu.synchronize()` inside the timed region; CPU eager work is "
    "complete when the call returns.",
    "- npu and reference samples alternate on every repeat, so load from other processes on the "
    "machine hits both sides alike; each table gives the median and the min–max over the repeats.",
    "- Small ops: 10,000 ops on 16-element tensors launched back to back, then one sync; round trips "
    "sync after every op.",
    "- Large kernels: inputs created once; a sample runs the kernel enough times to last >= 0.15 s.",
    "- Copies: preallocated buffers; a sample is 200 copies (1 MB) or 2 copies (256 MB) then one sync; "
    "the reference is `numpy.copyto` between two preallocated host buffers (one memcpy).",
    "- Training: a fixed synthetic batch resident on the device; a sample is 8 optimizer steps and "
    "one `loss.item()`; models are defined in `bench/models.py` (CNN: 3 conv-BN-ReLU stages, batch 16 "
    "of 3x32x32, SGD with momentum; transformer: 2 pre-norm blocks, width 128, 4 heads, context 64, "
    "batch 8, AdamW).",
    "- Allocator: the cache is emptied and peaks reset, then 3 warm-up steps and 20 measured steps; "
    "device segment allocations are the `segment.all.allocated` delta of `torch.npu.memory_stats()`.",
]

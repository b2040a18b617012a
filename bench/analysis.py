"""Why a missed target is missed and what would fix it, per measurement key, and the method notes.

The report quotes these for the rows that miss their target in a given run; keep them in step with
what profiling shows (see the closing section of docs/benchmarks.md).
"""

# Keyed by row key; a key without an exact entry falls back to its section's entry.
_SMALL_OPS = (
    "each npu op does on the calling thread what CPU eager does (dispatch, TensorIterator metadata, "
    "output allocation: ~1–2 us more than on the CPU) and then the launch: the opslib registry lookup, "
    "the elementwise plan and descriptors, the Python launch site for error messages, a runtime "
    "reference acquire/release, and the hand-off to the stream's worker thread under a mutex. The worker "
    "now polls for 50 us before it sleeps, which removed the futex wake-up and context switch per op "
    "(add went from 12.2 to ~10 us, the launch + sync round trip from 44 to ~22 us); what remains is "
    "mostly mutex traffic between the two threads and per-launch allocations. Fix (csrc/ + runtime/): a "
    "lock-free single-producer queue per stream; cache the resolved op entry and elementwise plan per "
    "(op, dtypes, shapes); hold the runtime reference for the stream's lifetime instead of per call; "
    "pool the executor and descriptor allocations.")

_NORM = (
    "layer_norm runs as the named device op aclnnLayerNorm (one queued task), but PyTorch's CPU layer "
    "norm exposes only its functional kernel to an out-of-tree library (the out= kernel and its dispatch "
    "stub are not exported), so the task computes into a fresh CPU tensor and copies the 32 MiB result "
    "into the device output: the copy and the fresh allocation's page faults are the ~15% over CPU "
    "eager. Fix: an opslib layer-norm kernel of our own that writes the device output directly (one pass "
    "for the statistics, one for the output), as opslib already does for the elementwise ops.")

_KERNEL_NOISE = (
    "this kernel runs the same ATen CPU kernel on the stream's worker thread, so npu time is CPU time plus "
    "one launch; a miss of a few percent is within this run's noise (compare the min–max spreads; other "
    "engineers were compiling on the same 2 cores). If it persists in a quiet run, check that the worker "
    "thread gets the same intra-op thread count as the caller (torch.get_num_threads()).")

_PAGEABLE = (
    "a copy to or from pageable host memory is synchronous: the memcpy is queued on the stream and the "
    "caller waits for it, so each 1 MB copy pays a hand-off to the worker thread and a wake-up back (tens "
    "of microseconds here) on top of a ~100 us memcpy; at 256 MB that cost vanishes and the target is met. "
    "Pinned, non_blocking copies pipeline and meet it too. Fix (csrc/aten/CopyKernelNpu.cpp): when the "
    "stream has nothing queued, do the pageable copy directly on the calling thread (the software NPU's "
    "device memory is host-addressable) and only queue + wait otherwise.")

_COPY_NOISE = (
    "copies are runtime memcpys on the stream's worker thread, so at large sizes they run at memcpy speed; "
    "at 1 MB each copy also pays its launch (a queue hand-off), which the 200-copy batch amortises only "
    "partly. A small miss here is also within this run's noise (see min–max).")

_TRANSFORMER = (
    "two host costs that CPU eager does not pay. (1) mul/div/add with a Python scalar turn the scalar "
    "into a device tensor with an extra fill_ launch, and AdamW's "
    "_foreach_mul_/_foreach_div_/_foreach_add_ take PyTorch's per-tensor slow path on npu: ~250 extra "
    "fill_ launches per step (profiler). (2) scaled_dot_product_attention takes the math path (no fused "
    "kernel for npu), about ten ops per call where the CPU runs one flash kernel. Fix: pass scalars to "
    "device ops as scalar descriptors instead of filling a device tensor; register the _foreach_* ops as "
    "one task per tensor list; a fused attention device op (npu_fusion_attention exists as a composite "
    "custom op).")

_CNN = (
    "batch norm, convolution and pooling now run as queued named device ops, so a step is the CPU "
    "kernels plus launch costs; the remaining gap (the figure moves between ~0.9 and ~1.05 across runs "
    "on this shared machine) is those launch costs (see small ops) and the convolution's output copy "
    "(at::convolution returns a fresh tensor, copied into the device output). Fix: the small-op launch "
    "fixes above; a convolution entry point that writes the device output in place.")

_ALL_REDUCE = (
    "each hccl all_reduce is a task on the communication stream that waits for its fingerprint exchange "
    "(a tiny Gloo all_gather issued when the call is made) and then runs Gloo's all_reduce on host views of "
    "the device memory: the data path is Gloo's, plus a hand-off to the stream's worker thread and the "
    "fingerprint exchange's CPU time. On 2 cores shared with other work those extra threads compete with "
    "Gloo's own; at 1 MB they are a visible share of a ~0.3 ms operation, from 16 MB up they vanish. Fix "
    "(csrc/distributed/): skip the fingerprint exchange for a repeat of the previous collective's "
    "fingerprint once both ranks have confirmed it, and run Gloo's algorithm on the stream's thread.")

_COMPILED_VS_EAGER = (
    "both steps spend most of their time in GEMMs and convolutions, which are the same CPU kernels compiled "
    "or eager (the compiled transformer step runs 13 GEMM calls forward and 26 backward around 17 fused "
    "kernels); fusion removes only the elementwise ops' memory traffic and launches, and eager npu already "
    "hides its launch costs behind the stream (the host queues while the stream's worker computes). The "
    "figure also moves with the load other processes put on the 2 cores: fused kernels are OpenMP regions "
    "whose threads wait for each other. Fix: fuse GEMM epilogues (Inductor's C++ GEMM templates serve only "
    "the cpu device in 2.13) so that fewer passes over activations remain.")

_COMPILED_VS_INDUCTOR = (
    "the kernels and extern GEMMs are the ones CPU Inductor runs, so the difference is how they are run: "
    "each kernel and extern op is a host task on the stream's worker, whose OpenMP threads share the 2 cores "
    "with the host thread queuing the next step (CPU Inductor runs everything on the calling thread). Fix: "
    "queue a graph's consecutive kernels as one host task, and keep the host thread off the cores while the "
    "worker computes.")

WHY = {
    "distributed": _ALL_REDUCE,
    "small_ops": _SMALL_OPS,
    "kernels": _KERNEL_NOISE,
    "kernels.layer_norm": _NORM,
    "copies": _COPY_NOISE,
    "copies.H2D_pageable_1MB": _PAGEABLE,
    "copies.D2H_pageable_1MB": _PAGEABLE,
    "training": _CNN,
    "training.CNN_eager": _CNN,
    "training.transformer_eager": _TRANSFORMER,
    "training.CNN_compiled": _COMPILED_VS_INDUCTOR,
    "training.transformer_compiled": _COMPILED_VS_INDUCTOR,
    "training.CNN_compiled_vs_eager": _COMPILED_VS_EAGER,
    "training.transformer_compiled_vs_eager": _COMPILED_VS_EAGER,
    "allocator": (
        "a device segment was allocated after warm-up: some step needed a block size that the cache did not "
        "hold (check num_alloc_retries in the note; a retry empties the cache)."),
    "allocator.transformer_segments": (
        "one device segment is allocated at the 7th step (deterministically: steps 1–2 allocate 10 segments, "
        "step 7 one more, then none over 40 steps), so 3 warm-up steps do not reach the steady state. All of "
        "the transformer's blocks are small-pool blocks carved from 2 MiB segments; split blocks free in a "
        "different order from step to step, and at step 7 one request finds no free range large enough. "
        "Fix (csrc/core/NPUCachingAllocator.cpp): round small-pool requests to a few size classes so freed "
        "blocks fit later requests exactly, or grow the last segment in place (expandable segments) instead "
        "of mapping a new one."),
    "allocator.CNN_reserved_ratio": (
        "the caching allocator keeps CUDA's segment sizes: requests of 1–10 MiB get a 20 MiB segment and "
        "small ones 2 MiB segments. The CNN's largest activations are 2 MiB, so its mid-size pool reserves a "
        "20 MiB segment of which at most ~8 MiB is ever in use, against a total working set of ~9 MiB "
        "(peak figures in the table's note). Fix (csrc/core/NPUBlockPool.h): while "
        "the reserve is small, size mid-size segments to the request rounded to 2 MiB, or grow segments in "
        "place (CUDA's expandable_segments, cheap for host-backed device memory); for models whose working "
        "set is hundreds of MiB the ratio approaches 1 with the present sizes."),
    "allocator.transformer_reserved_ratio": (
        "all of the transformer's blocks are under 1 MiB, so they live in 2 MiB small-pool segments; at the "
        "peak the last segments are partly used, and a segment added after warm-up by fragmentation (see the "
        "segments-per-step row) adds 2 MiB that the peak never fills. Fix: small-pool size classes or "
        "expandable segments (see that row), and smaller small-pool segments while the reserve is small."),
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
    "- Where npu beats the CPU on large elementwise kernels (add, softmax) the difference is memory, not "
    "arithmetic: CPU eager allocates a fresh 64 MB output on every call (glibc maps it and page-faults it "
    "in; `torch.add(a, b, out=o)` on the CPU is ~2.5x faster than `a + b` here), while the npu caching "
    "allocator reuses device memory. Both sides run the same ATen CPU kernels.",
    "- npu can beat CPU eager in training: the host queues the next ops while the stream's worker "
    "thread computes, so Python and dispatch overlap with compute, as with a real accelerator; on a loaded "
    "machine its two busy threads also get a larger share of the cores than CPU eager's one Python "
    "thread between kernels.",
    "- Distributed: 2 ranks as 2 processes on this machine (Gloo over loopback TCP). all_reduce bus "
    "bandwidth follows nccl-tests (size / time x 2(n-1)/n); each sample is ~32 MB of back-to-back "
    "all_reduces started together after a barrier and ended by a synchronize, hccl on npu tensors and "
    "Gloo on CPU tensors alternating in the same processes. DDP rows time windows of optimizer steps "
    "of the training section's CNN ending in loss.item().",
    "- The machine is shared (other builds run on the same 2 cores), so single figures move by tens of "
    "percent between runs; the load average at start and end is recorded above. Ratios close to a target "
    "should be read with the min–max spreads.",
]

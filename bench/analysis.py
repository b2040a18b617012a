"""Why a missed target is missed and what would fix it, per measurement key, and the method notes.

The report quotes these for the rows that miss their target in a given run; keep them in step with
what profiling shows (see the closing section of docs/benchmarks.md).
"""

# Keyed by row key; a key without an exact entry falls back to its section's entry.
_SMALL_OPS = (
    'the launch path takes a direct route for same-layout elementwise calls (no TensorIterator), looks '
    'the device op up once per call site, reuses tensor and scalar descriptors per operand geometry '
    "and value (only the address is rebound), skips the device op's geometry checks and planning for "
    'descriptors it validated before (only the new addresses are checked), recycles the caching '
    "allocator's tree nodes and blocks, pools executors, reads the Python frames without the GIL and "
    'hands tasks to a lock-free per-stream queue in one-cache-line slots. Counted with callgrind (table '
    "above, independent of load) an npu `a + b` costs about 1.2x the instructions of CPU eager's. The "
    'timed ratio was above the instruction ratio while every op crossed to the stream worker on the '
    'other core (the task slot, the queue counter and the executor moved between the two caches, at a '
    "cost that depends on where the virtual machine's two cores sit); elementwise ops of up to 1024 "
    'elements now run on the calling thread when the stream is idle, as in a loop of tiny ops. What '
    'remains is instructions: the per-op descriptor binding, address checks and allocator bookkeeping '
    "(launch-path table above). Fix: fewer thread-local lookups per op (each is a call in a shared "
    'library) and a smaller executor for contiguous same-dtype ops.')

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
    'blocking pageable copies now run on the calling thread when the stream has nothing queued (no '
    'hand-off to the worker and back); D2H meets the target in this run. The H2D median is within '
    "this run's noise (best samples 0.80, samples 4.8-14 GB/s on a loaded machine); recheck on a "
    'quiet one.')

_COPY_NOISE = (
    "copies are runtime memcpys on the stream's worker thread and run at memcpy speed once queued; a "
    "synchronising caller is woken when the copies it waits for are done (it used to be woken after "
    "each one, which cost the worker a futex call per 1 MB copy). A small miss here is within this "
    "run's noise (see min–max).")

_TRANSFORMER = (
    "the transformer's host costs that CPU eager does not pay were the scalar fill_ launches and the "
    "optimizer's per-tensor foreach fallbacks; Python numbers now go to the device ops as scalar "
    'descriptors and the _foreach_* ops of SGD, Adam and AdamW run as one task per tensor list. In a '
    'loaded full run (load average 5-7) the training samples spread over a factor of four on both '
    "sides; rerunning the training section alone gave CNN 1.04 and transformer 1.06 (main's build, "
    'measured in between: 0.97 and 0.88). scaled_dot_product_attention still takes the math path '
    '(about ten ops where the CPU runs one fused kernel). Fix: a fused attention device op; judge the '
    'target on a quiet machine.')

_CNN = (
    'a CNN step is the CPU kernels plus launch costs (batch norm, convolution and pooling run as '
    "queued named device ops); see the transformer row for what this run's load did to the training "
    'figures and for the section rerun alone, which met the target.')

_ALL_REDUCE = (
    "each hccl all_reduce is a task on the communication stream that waits for its fingerprint exchange "
    "(a tiny Gloo all_gather issued when the call is made) and then runs Gloo's all_reduce on host views of "
    "the device memory: the data path is Gloo's, plus a hand-off to the stream's worker thread. On a quiet "
    "machine the ratio is 0.96-1.08 from 1 MB up; a miss means the run shared the 2 cores with other work, "
    "where the extra threads (two ranks, each with a caller, a stream worker and Gloo's threads) wait for "
    "each other longer. Rerun the section alone: bench/run.py --only distributed --update.")

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
        "a page was mapped after warm-up: the step planner did not serve every measured step from its plan "
        "(torch.npu.memory._step_plan_stats() counts misses and steps that left the recorded sequence), and "
        "best fit found no free run large enough. Best fit alone maps once more in the 7th step: freed small "
        "blocks are fragmented across the range, and the layout never settles into a cycle."),
    "allocator.CNN_reserved_ratio": (
        "each stream has one expandable range shared by blocks of every size, so the peaks of small and "
        "large blocks share pages; a miss here means a step's peak came with fragmentation of the range."),
    "allocator.transformer_reserved_ratio": (
        "the transformer's blocks are all small blocks (under 1 MiB), so sharing the range with large blocks "
        "changes nothing; the reserve is set by fragmentation. Best fit alone reaches 1.19x by the 7th step "
        "(default settings 1.16x): AdamW's state, created during the first step, lands in the holes the first "
        "backward left, and each step's activations then fit around it. Every online placement rule tried on "
        "its trace lands between 1.15 and 1.24x; planned offline with every free time known it needs 1.003x. "
        "The step planner plans from the second step (the first creates the optimizer state) and serves the "
        "rest from that plan, so the reserve stays at the second step's 1.11x. A miss means the planner did "
        "not take over (see torch.npu.memory._step_plan_stats()) or the first two steps fragmented more."),
}


def explain(key: str) -> str:
    if key in WHY:
        return WHY[key]
    return WHY.get(key.split(".")[0], "no analysis recorded for this measurement yet.")


METHOD = [
    "- `bench/run.py --only SECTION --update` reruns sections alone and keeps the other rows of the last "
    "run; the machine table lists each such rerun with its load and commit.",
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
    "- Allocator: each model and setting runs in a fresh process (tensors that earlier sections keep "
    "alive would pin segments whose free parts serve the loop without counting as its reserve): "
    "3 repeats of 3 warm-up steps and 20 measured steps, the cache emptied and peaks reset before each "
    "(with expandable segments the step planner serves the steps from the third on); device "
    "allocations are the `num_device_alloc` delta of `torch.npu.memory_stats()` (segments and page "
    "mappings).",
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

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

_COMPILED_VS_INDUCTOR = (
    "the kernels and extern GEMMs are the ones CPU Inductor runs, so the difference is how they are run: "
    "each kernel and extern op is a host task on the stream's worker, whose OpenMP threads share the 2 cores "
    "with the host thread queuing the next step (CPU Inductor runs everything on the calling thread). Fix: "
    "queue a graph's consecutive kernels as one host task, and keep the host thread off the cores while the "
    "worker computes.")

_DEMO = (
    "the demo's model spends its steps in convolutions and batch norms, which the stream worker runs "
    "with the same ATen and oneDNN kernels as CPU eager (OpenMP on the same 2 cores): npu time is those "
    "kernels, the host's launches (the launching thread competes with the worker's OpenMP team for the "
    "2 cores) and the time the worker waits while the host loads the next batch after each "
    "loss.item(). Fix: fewer launch instructions per op, and capture and replay of the step (NPU "
    "graphs) so the host does not compete with the kernels at all.")

_CPU_AFTER_NPU = (
    "CPU work ran slower in a process that had run npu kernels. The known cause was OpenMP: a stream "
    "worker's thread team stayed alive and libgomp, managing more threads than CPUs, stopped letting "
    "any team spin between parallel regions. Workers now release their team after 2 ms idle; a miss "
    "means something else kept threads busy or alive (count /proc/self/task after npu work).")

WHY = {
    "demo.npu_vs_cpu": _DEMO,
    "demo.cpu_after_npu": _CPU_AFTER_NPU,
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
    "- References are isolated from npu work: every section runs in a fresh process, and every CPU "
    "sample starts from `quiesce()` (no device work queued or running, no OpenMP team kept by a stream "
    "worker or by the timing thread); npu and reference samples alternate on every repeat, so load from "
    "other processes and the caches' state hit both sides alike. The demo section goes further: each of "
    "its runs is a process of its own, and the pristine CPU runs never import torch_npu. Its 'CPU eager "
    "after one npu convolution' row measures what npu work in a process does to CPU work (target: "
    "within 5%).",
    "- Each table gives the median and the min–max over the repeats.",
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
    "thread computes, so Python and dispatch overlap with compute, as with a real accelerator; and the "
    "host kernels' temporaries come from a cache (CPU eager page-faults each large temporary in again).",
    "- Distributed: 2 ranks as 2 processes on this machine (Gloo over loopback TCP). all_reduce bus "
    "bandwidth follows nccl-tests (size / time x 2(n-1)/n); each sample is ~32 MB of back-to-back "
    "all_reduces started together after a barrier and ended by a synchronize, hccl on npu tensors and "
    "Gloo on CPU tensors alternating in the same processes. DDP rows time windows of optimizer steps "
    "of the training section's CNN ending in loss.item().",
    "- The machine is shared (other builds run on the same 2 cores), so single figures move by tens of "
    "percent between runs; the load average at start and end is recorded above. Ratios close to a target "
    "should be read with the min–max spreads.",
]

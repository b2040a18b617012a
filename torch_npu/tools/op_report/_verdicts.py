"""The verdicts an op gets in the op-support report: their order (blockers first) and what each means."""

CPU_FALLBACK = "CPU fallback"
GENERIC = "generic executor"
UNKNOWN = "unknown"
NPU_KERNEL = "npu kernel"
DEVICE_OP = "named device op"
ORDER = {CPU_FALLBACK: 0, GENERIC: 1, UNKNOWN: 2, NPU_KERNEL: 3, DEVICE_OP: 4}
EXPLAIN = {
    CPU_FALLBACK: "copied to the CPU and back, synchronously (no Meta kernel, data-dependent output or strict "
                  "mode): slow on any device; a real NPU would not run it",
    GENERIC: "a CPU kernel queued on the npu stream (generic executor): a real NPU's op library would not run it",
    UNKNOWN: "not an op of this build's registry",
    NPU_KERNEL: "an npu kernel (views, copies, creation, custom ops, or built from other npu ops)",
    DEVICE_OP: "an adapter on a named device op (aclnnXxx)",
}

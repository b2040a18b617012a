// NPUResourceLimits.h - cube / vector core limits of a device and of a stream (torch.npu.set_device_limit,
// set_stream_limit): kept as set, reported back, and applied to the host threads a stream's kernels use.
#pragma once

#include <c10/core/Stream.h>

#include <cstdint>

namespace c10_npu {

// The software NPU runs a stream's kernels on host threads: the vector-core limit in force for a
// stream (its own, else its device's) gives it that share of the intra-op threads, at least one. The
// cube-core limit is kept and reported; the software NPU has no separate matrix units to restrict.
enum class CoreKind : int { kCube = 0, kVector = 1 };

// The device's core count of that kind (its properties).
int64_t coreCount(c10::DeviceIndex device, CoreKind kind);

// value: 1 .. coreCount(); throws ValueError otherwise.
void setDeviceCoreLimit(c10::DeviceIndex device, CoreKind kind, int64_t value);
int64_t deviceCoreLimit(c10::DeviceIndex device, CoreKind kind);  // coreCount() when none is set

// Stream limits apply in stream order: to the work launched on the stream after the call.
void setStreamCoreLimit(const c10::Stream& stream, CoreKind kind, int64_t value);
void resetStreamCoreLimits(const c10::Stream& stream);
int64_t streamCoreLimit(const c10::Stream& stream, CoreKind kind);  // the device's when none is set

// On a stream worker: how many of `threads` intra-op threads its kernels may use now.
int workerThreadCap(int threads);

}  // namespace c10_npu

// NPUTrace.h - stream, event, memory and sync notifications for the stream-race checker
// (torch_npu.npu._sanitizer), through PyTorch's GPU trace hooks into torch.npu._gpu_trace.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>

namespace c10_npu::trace {

// One key per stream across devices, the same as the checker computes from a torch.Stream:
// the device index in the high half, the stream id (0 = default stream) in the low half.
inline uintptr_t streamKey(c10::DeviceIndex device, c10::StreamId id) {
  return (static_cast<uintptr_t>(device) << 32) | static_cast<uintptr_t>(id);
}
inline uintptr_t streamKey(const c10::Stream& stream) {
  return streamKey(stream.device_index(), stream.id());
}

// Each call does nothing unless the checker has activated the trace, and nothing on threads Python
// does not know: a stream worker dropping the last reference to a block (or a communication thread
// syncing) must never wait for the GIL a Python thread may hold while it waits for that worker.
// A missed free costs nothing (the next allocation of the address resets its history).
// Notifications are sent only while enabled (torch_npu.npu._sanitizer turns them on and off).
void setEnabled(bool enabled);
// The adapter has no Python: the extension module installs the check "this is a Python thread".
void setPythonThreadCheck(bool (*is_python_thread)());

void eventCreated(const void* event);
void eventDestroyed(const void* event);
void eventRecorded(const void* event, const c10::Stream& stream);
void eventWaited(const void* event, const c10::Stream& stream);
void eventSynchronized(const void* event);
void memoryAllocated(const void* ptr);
void memoryFreed(const void* ptr);
void streamSynchronized(const c10::Stream& stream);
void deviceSynchronized();

}  // namespace c10_npu::trace

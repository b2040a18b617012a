// NPUTrace.cpp - forwards npu stream / event / memory / sync notifications to PyTorch's GPU trace.
#include "csrc/core/NPUTrace.h"

#include <atomic>

#include <c10/core/impl/GPUTrace.h>

namespace c10_npu::trace {

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

const c10::impl::PyInterpreter* active() { return c10::impl::GPUTrace::get_trace(); }

uintptr_t key(const void* p) { return reinterpret_cast<uintptr_t>(p); }

std::atomic<bool (*)()> g_holds_gil{nullptr};

// Python calls land here while holding the GIL; worker threads and interpreter shutdown do not.
bool holdsGil() {
  auto* check = g_holds_gil.load(std::memory_order_acquire);
  return check != nullptr && check();
}

}  // namespace

void setGilCheck(bool (*holds_gil)()) { g_holds_gil.store(holds_gil, std::memory_order_release); }

void eventCreated(const void* event) {
  if (auto* t = active()) (*t)->trace_gpu_event_creation(kNpu, key(event));
}

void eventDestroyed(const void* event) {
  if (auto* t = active(); t && holdsGil()) (*t)->trace_gpu_event_deletion(kNpu, key(event));
}

void eventRecorded(const void* event, const c10::Stream& stream) {
  if (auto* t = active()) (*t)->trace_gpu_event_record(kNpu, key(event), streamKey(stream));
}

void eventWaited(const void* event, const c10::Stream& stream) {
  if (auto* t = active()) (*t)->trace_gpu_event_wait(kNpu, key(event), streamKey(stream));
}

void eventSynchronized(const void* event) {
  if (auto* t = active()) (*t)->trace_gpu_event_synchronization(kNpu, key(event));
}

void memoryAllocated(const void* ptr) {
  if (auto* t = active(); t && holdsGil()) (*t)->trace_gpu_memory_allocation(kNpu, key(ptr));
}

void memoryFreed(const void* ptr) {
  if (auto* t = active(); t && holdsGil()) (*t)->trace_gpu_memory_deallocation(kNpu, key(ptr));
}

void streamSynchronized(const c10::Stream& stream) {
  if (auto* t = active()) (*t)->trace_gpu_stream_synchronization(kNpu, streamKey(stream));
}

void deviceSynchronized() {
  if (auto* t = active()) (*t)->trace_gpu_device_synchronization(kNpu);
}

}  // namespace c10_npu::trace

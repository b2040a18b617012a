// NPUTrace.cpp - forwards npu stream / event / memory / sync notifications to PyTorch's GPU trace.
#include "csrc/core/NPUTrace.h"

#include <atomic>

#include <c10/core/impl/GPUTrace.h>

namespace c10_npu::trace {

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

std::atomic<bool> g_enabled{false};

// PyTorch may have the trace on for other devices: npu only reports while the checker listens.
const c10::impl::PyInterpreter* active() {
  return g_enabled.load(std::memory_order_relaxed) ? c10::impl::GPUTrace::get_trace() : nullptr;
}

uintptr_t key(const void* p) { return reinterpret_cast<uintptr_t>(p); }

std::atomic<bool (*)()> g_is_python_thread{nullptr};

// Threads that run Python code can take the GIL here; the runtime's workers must not.
bool pythonThread() {
  auto* check = g_is_python_thread.load(std::memory_order_acquire);
  return check != nullptr && check();
}

}  // namespace

void setEnabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

void setPythonThreadCheck(bool (*is_python_thread)()) {
  g_is_python_thread.store(is_python_thread, std::memory_order_release);
}

void eventCreated(const void* event) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_event_creation(kNpu, key(event));
}

void eventDestroyed(const void* event) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_event_deletion(kNpu, key(event));
}

void eventRecorded(const void* event, const c10::Stream& stream) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_event_record(kNpu, key(event), streamKey(stream));
}

void eventWaited(const void* event, const c10::Stream& stream) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_event_wait(kNpu, key(event), streamKey(stream));
}

void eventSynchronized(const void* event) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_event_synchronization(kNpu, key(event));
}

void memoryAllocated(const void* ptr) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_memory_allocation(kNpu, key(ptr));
}

void memoryFreed(const void* ptr) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_memory_deallocation(kNpu, key(ptr));
}

void streamSynchronized(const c10::Stream& stream) {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_stream_synchronization(kNpu, streamKey(stream));
}

void deviceSynchronized() {
  if (auto* t = active(); t && pythonThread()) (*t)->trace_gpu_device_synchronization(kNpu);
}

}  // namespace c10_npu::trace

// NPUProfilerStubs.cpp - the legacy profiler hooks for npu (registerPrivateUse1Methods): with
// torch.autograd.profiler.profile(use_device="npu", use_kineto=False) each op is bracketed by events
// recorded on the current npu stream, and its npu time is the time between them.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <npu/runtime.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUStream.h"

namespace torch_npu::profiler {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct NPUProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = c10_npu::current_device();
    if (device != nullptr) *device = index;
    nrtEvent_t ev = nullptr;
    NPU_CHECK(nrtEventCreate(&ev));
    *event = ProfilerVoidEventStub(ev, [](void* e) { nrtEventDestroy(static_cast<nrtEvent_t>(e)); });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    NPU_CHECK(nrtEventRecord(ev, c10_npu::getCurrentNPUStream(index).handle()));
  }

  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    auto* a = static_cast<nrtEvent_t>(start->get());
    auto* b = static_cast<nrtEvent_t>(end->get());
    NPU_CHECK(nrtEventSynchronize(a));
    NPU_CHECK(nrtEventSynchronize(b));
    float ms = 0;
    NPU_CHECK(nrtEventElapsedTime(&ms, a, b));
    return ms * 1000.0f;  // microseconds
  }

  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = c10_npu::current_device();
    for (c10::DeviceIndex i = 0; i < c10_npu::device_count(); ++i) {
      c10_npu::set_device(i);
      op(i);
    }
    c10_npu::set_device(previous);
  }

  void synchronize() const override { NPU_CHECK(nrtDeviceSynchronize()); }
};

struct RegisterStubs {
  RegisterStubs() {
    static NPUProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
RegisterStubs register_stubs;

}  // namespace
}  // namespace torch_npu::profiler

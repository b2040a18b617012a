// NPUGuardImpl.cpp - device guard implementation over the runtime's devices, streams and events.
#include "csrc/core/NPUGuardImpl.h"

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUBlockingWait.h"
#include "csrc/core/NPUThreadTeams.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUStream.h"
#include "csrc/core/NPUTrace.h"

namespace c10_npu {

NPUGuardImpl::NPUGuardImpl(c10::DeviceType t) {
  TORCH_CHECK(t == static_type, "NPUGuardImpl initialized with non-npu device type ", t);
}

c10::Device NPUGuardImpl::exchangeDevice(c10::Device d) const {
  c10::Device old = getDevice();
  if (old.index() != d.index()) setDevice(d);
  return old;
}

c10::Device NPUGuardImpl::getDevice() const { return c10::Device(static_type, current_device()); }

void NPUGuardImpl::setDevice(c10::Device d) const {
  TORCH_CHECK(d.type() == static_type, "expected an npu device, got ", d);
  set_device(d.index());
}

void NPUGuardImpl::uncheckedSetDevice(c10::Device d) const noexcept {
  set_device_unchecked(d.index());
}

c10::Stream NPUGuardImpl::getStream(c10::Device d) const {
  return getCurrentNPUStream(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getDefaultStream(c10::Device d) const {
  return getDefaultNPUStream(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getStreamFromGlobalPool(c10::Device d, bool) const {
  return getStreamFromPool(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::getNewStream(c10::Device d, int) const {
  return getStreamFromPool(d.index()).unwrap();
}

c10::Stream NPUGuardImpl::exchangeStream(c10::Stream s) const {
  NPUStream stream(s);
  NPUStream old = getCurrentNPUStream(s.device_index());
  setCurrentNPUStream(stream);
  return old.unwrap();
}

c10::DeviceIndex NPUGuardImpl::deviceCount() const noexcept { return device_count(); }

void NPUGuardImpl::record(void** event, const c10::Stream& stream,
                          const c10::DeviceIndex device_index, const c10::EventFlag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "event on npu:",
              static_cast<int>(device_index), " cannot be recorded on a stream of ", stream.device());
  if (*event == nullptr) {
    nrtEvent_t created = nullptr;
    NPU_CHECK(nrtEventCreate(&created));
    *event = created;
    trace::eventCreated(created);
  }
  NPU_CHECK(nrtEventRecord(static_cast<nrtEvent_t>(*event), NPUStream(stream).handle()));
  trace::eventRecorded(*event, stream);
}

void NPUGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) return;  // never recorded: nothing to wait for
  NPU_CHECK(nrtStreamWaitEvent(NPUStream(stream).handle(), static_cast<nrtEvent_t>(event)));
  trace::eventWaited(event, stream);
}

bool NPUGuardImpl::queryEvent(void* event) const {
  if (event == nullptr) return true;
  nrtError_t err = nrtEventQuery(static_cast<nrtEvent_t>(event));
  if (err == NRT_ERROR_NOT_READY) return false;
  NPU_CHECK(err);
  return true;
}

void NPUGuardImpl::destroyEvent(void* event, const c10::DeviceIndex) const noexcept {
  if (event == nullptr) return;
  trace::eventDestroyed(event);
  nrtEventDestroy(static_cast<nrtEvent_t>(event));
}

void NPUGuardImpl::synchronizeEvent(void* event) const {
  if (event == nullptr) return;
  nrtError_t err;
  {
    BlockingWaitScope wait;
    noteBlockingWait();
    err = nrtEventSynchronize(static_cast<nrtEvent_t>(event));
  }
  NPU_CHECK(err);
  trace::eventSynchronized(event);
}

double NPUGuardImpl::elapsedTime(void* event1, void* event2, const c10::DeviceIndex) const {
  TORCH_CHECK(event1 && event2, "elapsed_time needs both events to have been recorded");
  float ms = 0;
  NPU_CHECK(nrtEventElapsedTime(&ms, static_cast<nrtEvent_t>(event1), static_cast<nrtEvent_t>(event2)));
  return ms;
}

bool NPUGuardImpl::queryStream(const c10::Stream& stream) const { return NPUStream(stream).query(); }

void NPUGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  NPUStream(stream).synchronize();
}

void NPUGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  device_synchronize(device_index < 0 ? current_device() : device_index);
}

void NPUGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                                         const c10::Stream& stream) const {
  NPUCachingAllocator::recordStream(data_ptr, NPUStream(stream));
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NPUGuardImpl);

}  // namespace c10_npu

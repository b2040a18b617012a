// AclStreamEvent.cpp - streams, events and host functions: the runtime's own, under ACL's names.
#include <new>
#include <string>

#include "AclError.h"
#include "acl/acl_rt.h"

using npu::toolkit::Fail;
using npu::toolkit::FromRuntime;

namespace {

nrtEvent_t Event(aclrtEvent event) { return static_cast<nrtEvent_t>(event); }

struct HostCall {
  aclrtHostFunc fn;
  void* args;
};

int RunHostCall(void* data) {
  HostCall* call = static_cast<HostCall*>(data);
  call->fn(call->args);
  delete call;
  return 0;
}

}  // namespace

extern "C" {

aclError aclrtCreateStream(aclrtStream* stream) {
  if (stream == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
  return FromRuntime(nrtStreamCreate(stream));
}

aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
  (void)priority;  // one kind of stream: priorities and fast launch mean nothing here
  (void)flag;
  return aclrtCreateStream(stream);
}

aclError aclrtDestroyStream(aclrtStream stream) {
  if (stream == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: the default stream cannot be destroyed");
  return FromRuntime(nrtStreamDestroy(stream));
}

aclError aclrtSynchronizeStream(aclrtStream stream) { return FromRuntime(nrtStreamSynchronize(stream)); }

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
  if (status == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
  const nrtError_t error = nrtStreamQuery(stream);
  if (error == NRT_ERROR_NOT_READY) {
    *status = ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
  }
  if (error != NRT_SUCCESS) return FromRuntime(error);
  *status = ACL_STREAM_STATUS_COMPLETE;
  return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return FromRuntime(nrtStreamWaitEvent(stream, Event(event)));
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
  if (fn == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchHostFunc: fn is NULL");
  HostCall* call = new (std::nothrow) HostCall{fn, args};
  if (call == nullptr) return Fail(ACL_ERROR_BAD_ALLOC, "aclrtLaunchHostFunc: out of host memory");
  const nrtError_t error = nrtLaunchHostFunc(stream, &RunHostCall, call);
  if (error != NRT_SUCCESS) delete call;  // refused: never queued
  return FromRuntime(error);
}

aclError aclrtCreateEvent(aclrtEvent* event) {
  if (event == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
  nrtEvent_t created = nullptr;
  if (aclError error = FromRuntime(nrtEventCreate(&created))) return error;
  *event = created;
  return ACL_SUCCESS;
}

aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
  (void)flag;  // every event can be waited for, synchronised on and timed
  return aclrtCreateEvent(event);
}

aclError aclrtDestroyEvent(aclrtEvent event) { return FromRuntime(nrtEventDestroy(Event(event))); }

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return FromRuntime(nrtEventRecord(Event(event), stream));
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  (void)stream;  // a record replaces the previous one: nothing to reset, but the event must exist
  return FromRuntime(nrtEventQuery(Event(event)) == NRT_ERROR_INVALID_HANDLE ? NRT_ERROR_INVALID_HANDLE
                                                                                : NRT_SUCCESS);
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  if (status == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is NULL");
  const nrtError_t error = nrtEventQuery(Event(event));
  if (error == NRT_ERROR_NOT_READY) {
    *status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
  }
  if (error != NRT_SUCCESS) return FromRuntime(error);
  *status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) { return FromRuntime(nrtEventSynchronize(Event(event))); }

aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  return FromRuntime(nrtEventElapsedTime(ms, Event(startEvent), Event(endEvent)));
}

aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t* timestamp) {
  return FromRuntime(nrtEventGetTimestamp(Event(event), timestamp));
}

}  // extern "C"

// Event.cpp - event records, the event registry, and the event C API.
#include "Event.h"

#include "Capture.h"
#include "npu/graph.h"

#include <utility>

#include "Activity.h"
#include "Error.h"
#include "Runtime.h"
#include "Stream.h"
#include "StreamRegistry.h"

namespace npu::runtime {

void EventRecord::Complete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    time_ = std::chrono::steady_clock::now();
    done_ = true;
  }
  completed_.notify_all();
}

void EventRecord::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  completed_.wait(lock, [&] { return done_; });
}

bool EventRecord::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

std::chrono::steady_clock::time_point EventRecord::time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return time_;
}

std::shared_ptr<EventRecord> Event::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Event::set_latest(std::shared_ptr<EventRecord> record) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(record);
}

nrtEvent_t EventRegistry::Create(bool external) {
  const uint64_t id = NextHandleId();
  events_.Insert(id, std::make_shared<Event>(external));
  return ToHandle<nrtEvent_t>(id);
}

void ExternalFlag::Set() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
  }
  cv_.notify_all();
}

void ExternalFlag::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  set_ = false;
}

bool ExternalFlag::IsSet() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_;
}

bool ExternalFlag::WaitFor(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return set_; });
}


nrtError_t ExternalRecord(Stream& stream, const std::shared_ptr<ExternalFlag>& flag) {
  return EnqueueOrRecord(stream, [flag] {
    flag->Set();
    return 0;
  }, "external event record", "event");
}

nrtError_t ExternalWait(Stream& stream, const std::shared_ptr<ExternalFlag>& flag) {
  Stream* waiter = &stream;  // runs the task, so outlives it
  return EnqueueOrRecord(stream, [flag, waiter] {
    while (!flag->WaitFor(std::chrono::milliseconds(50))) {
      if (waiter->stopping()) return 0;  // the stream is being destroyed: stop waiting
    }
    return 0;
  }, "external event wait", "event");
}

nrtError_t ExternalReset(Stream& stream, const std::shared_ptr<ExternalFlag>& flag) {
  return EnqueueOrRecord(stream, [flag] {
    flag->Clear();
    return 0;
  }, "external event reset", "event");
}

nrtError_t CheckCapturedEvent(const char* call, nrtEvent_t event, const EventRecord& record) {
  if (record.capture->ended()) return NRT_SUCCESS;  // its capture is over: nothing left to wait for
  return record.capture->Refuse(
      NRT_ERROR_CAPTURE_UNSUPPORTED,
      StrCat(call, " on event #", HandleId(event), ", which was recorded in capture #", record.capture->id(),
             ", is not allowed while the capture lasts: captured work has not run"));
}

nrtError_t JoinCapture(const std::shared_ptr<Stream>& waiter, nrtEvent_t event, const EventRecord& record) {
  const std::shared_ptr<Capture>& capture = record.capture;
  if (waiter->capturing()) {
    std::shared_ptr<Capture> own = waiter->capture();
    if (own && own != capture) {
      return own->Refuse(NRT_ERROR_CAPTURE_UNSUPPORTED,
                         StrCat(waiter->name(), " (capturing into capture #", own->id(), ") cannot wait for event #",
                                HandleId(event), " of capture #", capture->id(), ": captures cannot depend on "
                                "each other"));
    }
  }
  capture->Wait(waiter, record.capture_stream, record.capture_position);
  if (!waiter->capturing()) waiter->SetCapture(capture);  // fork: the waiter records into the capture
  return NRT_SUCCESS;
}

namespace {

nrtError_t FailUnknownEvent(nrtEvent_t handle) {
  return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, "event #", HandleId(handle),
                     " is not a live event: it was destroyed, or not created by nrtEventCreate "
                     "since the last nrtFinalize");
}

}  // namespace

nrtError_t EventRegistry::Resolve(nrtEvent_t handle, std::shared_ptr<Event>* event) const {
  *event = events_.Find(HandleId(handle));
  return *event ? NRT_SUCCESS : FailUnknownEvent(handle);
}

nrtError_t EventRegistry::Destroy(nrtEvent_t handle) {
  return events_.Remove(HandleId(handle)) ? NRT_SUCCESS : FailUnknownEvent(handle);
}

}  // namespace npu::runtime

using npu::runtime::EventRecord;
using npu::runtime::Runtime;
using EventPtr = std::shared_ptr<npu::runtime::Event>;
using StreamPtr = std::shared_ptr<npu::runtime::Stream>;

extern "C" {

nrtError_t nrtEventCreate(nrtEvent_t* event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (event == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtEventCreate: event is NULL");
    }
    *event = rt.events().Create();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtEventCreateExternal(nrtEvent_t* event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (event == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtEventCreateExternal: event is NULL");
    *event = rt.events().Create(/*external=*/true);
    return NRT_SUCCESS;
  });
}

nrtError_t nrtEventResetAsync(nrtEvent_t event, nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    EventPtr found_event;
    StreamPtr found_stream;
    if (nrtError_t error = rt.events().Resolve(event, &found_event)) return error;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found_stream)) return error;
    if (!found_event->external) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtEventResetAsync: event #", npu::runtime::HandleId(event),
                         " is not external (create it with nrtEventCreateExternal)");
    }
    return npu::runtime::ExternalReset(*found_stream, found_event->external);
  });
}

nrtError_t nrtEventDestroy(nrtEvent_t event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) { return rt.events().Destroy(event); });
}

nrtError_t nrtEventRecord(nrtEvent_t event, nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    EventPtr found_event;
    StreamPtr found_stream;
    if (nrtError_t error = rt.events().Resolve(event, &found_event)) return error;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found_stream)) {
      return error;
    }
    if (found_event->external) return npu::runtime::ExternalRecord(*found_stream, found_event->external);
    auto record = std::make_shared<EventRecord>(found_stream);
    if (found_stream->capturing()) {
      if (std::shared_ptr<npu::runtime::Capture> capture = found_stream->capture()) {
        record->capture_stream = found_stream->id();
        record->capture_position = capture->Position(found_stream->id());
        record->capture = std::move(capture);
        found_event->set_latest(std::move(record));
        return NRT_SUCCESS;
      }
    }
    if (npu::runtime::activity::Active()) {
      npu::runtime::activity::EventRecorded(found_stream->id(), found_stream->device(), record);
    }
    if (nrtError_t error = found_stream->EnqueueMarker(record)) return error;
    found_event->set_latest(std::move(record));
    return NRT_SUCCESS;
  });
}

nrtError_t nrtEventSynchronize(nrtEvent_t event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    EventPtr found;
    if (nrtError_t error = rt.events().Resolve(event, &found)) return error;
    if (found->external) {
      while (!found->external->WaitFor(std::chrono::milliseconds(50))) {
      }
      return NRT_SUCCESS;
    }
    const std::shared_ptr<EventRecord> record = found->latest();
    if (!record) return NRT_SUCCESS;
    if (record->capture) return npu::runtime::CheckCapturedEvent("nrtEventSynchronize", event, *record);
    StreamPtr stream = record->stream();
    if (stream && stream->OnWorkerThread() && !record->done()) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "cannot synchronize event #",
                         npu::runtime::HandleId(event), " from a host function of ", stream->name(),
                         ", which has yet to reach it: it would wait for itself");
    }
    if (stream && stream->watched()) {
      // Watchdog on: a stuck task before the event turns into an error instead of a hang.
      if (nrtError_t error = stream->WaitWatched([&] { return record->done(); })) return error;
    } else {
      record->Wait();
    }
    return stream ? npu::runtime::ReportTaskErrors({stream}) : NRT_SUCCESS;
  });
}

nrtError_t nrtEventQuery(nrtEvent_t event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    EventPtr found;
    if (nrtError_t error = rt.events().Resolve(event, &found)) return error;
    if (found->external) return found->external->IsSet() ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
    const std::shared_ptr<EventRecord> record = found->latest();
    if (record && record->capture) return npu::runtime::CheckCapturedEvent("nrtEventQuery", event, *record);
    return !record || record->done() ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
  });
}

nrtError_t nrtEventElapsedTime(float* ms, nrtEvent_t start, nrtEvent_t end) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (ms == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtEventElapsedTime: ms is NULL");
    }
    EventPtr events[2];
    const nrtEvent_t handles[2] = {start, end};
    std::shared_ptr<EventRecord> records[2];
    for (int i = 0; i < 2; ++i) {
      if (nrtError_t error = rt.events().Resolve(handles[i], &events[i])) return error;
      records[i] = events[i]->latest();
      if (!records[i]) {
        return NPU_RT_FAIL(NRT_ERROR_EVENT_NOT_RECORDED, "nrtEventElapsedTime: the ",
                           i == 0 ? "start" : "end", " event #", npu::runtime::HandleId(handles[i]),
                           " was never recorded; call nrtEventRecord on it first");
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (!records[i]->done()) {
        return NPU_RT_FAIL(NRT_ERROR_NOT_READY, "nrtEventElapsedTime: the ",
                           i == 0 ? "start" : "end", " event #", npu::runtime::HandleId(handles[i]),
                           " has not completed yet; synchronize on it first");
      }
    }
    *ms = std::chrono::duration<float, std::milli>(records[1]->time() - records[0]->time()).count();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtEventGetTimestamp(nrtEvent_t event, uint64_t* timestamp_us) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (timestamp_us == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtEventGetTimestamp: timestamp is NULL");
    }
    EventPtr found;
    if (nrtError_t error = rt.events().Resolve(event, &found)) return error;
    std::shared_ptr<EventRecord> record = found->latest();
    if (!record) {
      return NPU_RT_FAIL(NRT_ERROR_EVENT_NOT_RECORDED, "nrtEventGetTimestamp: event #",
                         npu::runtime::HandleId(event), " was never recorded; call nrtEventRecord on it first");
    }
    if (!record->done()) {
      return NPU_RT_FAIL(NRT_ERROR_NOT_READY, "nrtEventGetTimestamp: event #", npu::runtime::HandleId(event),
                         " has not completed yet; synchronize on it first");
    }
    *timestamp_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(record->time().time_since_epoch()).count());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamWaitEvent(nrtStream_t stream, nrtEvent_t event) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    StreamPtr found_stream;
    EventPtr found_event;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found_stream)) {
      return error;
    }
    if (nrtError_t error = rt.events().Resolve(event, &found_event)) return error;
    if (found_event->external) return npu::runtime::ExternalWait(*found_stream, found_event->external);
    std::shared_ptr<EventRecord> record = found_event->latest();
    if (record && record->capture && !record->capture->ended()) {
      return npu::runtime::JoinCapture(found_stream, event, *record);
    }
    if (!record || record->done() || record->capture) return NRT_SUCCESS;
    if (found_stream->capturing()) {
      if (std::shared_ptr<npu::runtime::Capture> capture = found_stream->capture()) {
        return capture->Refuse(
            NRT_ERROR_CAPTURE_UNSUPPORTED,
            npu::runtime::StrCat(found_stream->name(), " is capturing and cannot wait for event #",
                                 npu::runtime::HandleId(event), ", recorded before the capture and not yet "
                                 "complete: a capture may only depend on work recorded inside it (make the "
                                 "streams wait for each other before the capture begins)"));
      }
    }
    if (npu::runtime::activity::Active()) npu::runtime::activity::LabelTask(NRT_ACTIVITY_EVENT_WAIT, nullptr);
    npu::runtime::Stream* waiter = found_stream.get();  // runs the task, so outlives it
    return found_stream->Enqueue([record = std::move(record), waiter] {
      waiter->WaitForEvent(*record);
      return 0;
    }, /*after_count=*/false, "an event wait");
  });
}

}  // extern "C"

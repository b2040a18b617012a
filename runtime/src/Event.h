// Event.h - events: markers recorded into a stream that complete, timestamped, in stream order.
#ifndef NPU_RUNTIME_SRC_EVENT_H_
#define NPU_RUNTIME_SRC_EVENT_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "HandleTable.h"
#include "npu/runtime.h"

namespace npu::runtime {

class Capture;
class Stream;

// One nrtEventRecord() call. Shared by the event and the tasks that complete or wait for it, so
// destroying or re-recording the event never pulls it from under a waiting stream.
class EventRecord {
 public:
  explicit EventRecord(std::weak_ptr<Stream> stream) : stream_(std::move(stream)) {}

  void Complete();
  void Wait();
  bool done() const;
  std::chrono::steady_clock::time_point time() const;  // meaningful once done()
  // The stream it was recorded on, whose task errors an event sync reports; null once destroyed.
  std::shared_ptr<Stream> stream() const { return stream_.lock(); }

  // A record made on a capturing stream is a position in the capture, not a marker: streams that
  // wait for it join the capture; it never completes (and counts as done once the capture ended).
  std::shared_ptr<Capture> capture;
  uint64_t capture_stream = 0;
  uint64_t capture_position = 0;

 private:
  mutable std::mutex mu_;
  std::condition_variable completed_;
  bool done_ = false;
  std::chrono::steady_clock::time_point time_;
  const std::weak_ptr<Stream> stream_;
};

// An external event's flag (nrtEventCreateExternal): set by records, cleared by resets, waited for.
class ExternalFlag {
 public:
  void Set();
  void Clear();
  bool IsSet() const;
  // Waits until set, or for `timeout` at most; true if set.
  bool WaitFor(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool set_ = false;
};

class Event {
 public:
  explicit Event(bool external = false) : external(external ? std::make_shared<ExternalFlag>() : nullptr) {}
  const std::shared_ptr<ExternalFlag> external;  // null for ordinary events

  std::shared_ptr<EventRecord> latest() const;  // null if never recorded
  void set_latest(std::shared_ptr<EventRecord> record);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<EventRecord> latest_;
};

class EventRegistry {
 public:
  nrtEvent_t Create(bool external = false);
  nrtError_t Resolve(nrtEvent_t handle, std::shared_ptr<Event>* event) const;
  nrtError_t Destroy(nrtEvent_t handle);

 private:
  HandleTable<Event> events_;
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_EVENT_H_

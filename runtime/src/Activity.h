// Activity.h - the recorder behind npu/activity.h: API calls label the task they are about to enqueue,
// the stream hooks stamp it (enqueue, start, end), finished records wait in a bounded buffer.
#ifndef NPU_RUNTIME_SRC_ACTIVITY_H_
#define NPU_RUNTIME_SRC_ACTIVITY_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "npu/activity.h"

namespace npu::runtime {

class EventRecord;

namespace activity {

// True while anything is being recorded (recording on, or recorded tasks still to finish). The hooks
// test it first, so that with recording off a task costs this one relaxed load.
extern std::atomic<bool> g_active;
inline bool Active() { return g_active.load(std::memory_order_relaxed); }
// True while new work is recorded (between nrtActivityEnable and nrtActivityDisable).
bool Accepting();

uint64_t Now();

// API layer, right before Stream::Enqueue: what the task this thread enqueues next is.
void LabelTask(nrtActivityKind kind, const char* name, uint64_t bytes = 0, uint32_t memcpy_kind = 0,
               uint32_t block_dim = 0);
// Same, for the next nrtLaunchHostFunc of this thread (which takes it with TakeHostFuncLabel).
void LabelNextHostFunc(nrtActivityKind kind, const char* name, uint64_t bytes = 0, uint32_t block_dim = 0);
void TakeHostFuncLabel();

// Stream hooks. `index` numbers the tasks a stream was given (0, 1, ...), so that the record made at
// enqueue is found again when the worker reaches the task.
void TaskEnqueued(uint64_t stream_id, int device, uint64_t index);
// On the worker: true if the task is recorded; then TaskFinished follows on the same thread.
bool TaskStarting(uint64_t stream_id, uint64_t index);
void TaskFinished(bool failed);

// Work that is not a queued task.
void CopyRan(int device, uint64_t bytes, uint32_t memcpy_kind, uint64_t start_ns, uint64_t end_ns);
void EventRecorded(uint64_t stream_id, int device, std::shared_ptr<EventRecord> record);
// A task of a graph replay (which runs as one queued task, recorded as such), on the replaying stream.
void NodeRan(nrtActivityKind kind, const char* name, uint64_t stream_id, int device, uint64_t start_ns,
             uint64_t end_ns, bool failed);

}  // namespace activity
}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_ACTIVITY_H_

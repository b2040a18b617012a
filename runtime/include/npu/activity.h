// npu/activity.h - activity records of the software NPU: one record per task a stream runs (C API, no
// PyTorch dependency), for profilers.
#ifndef NPU_ACTIVITY_H_
#define NPU_ACTIVITY_H_

#include <stddef.h>
#include <stdint.h>

#include "npu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

// What a task was. Named device ops and collectives are host functions whose launcher labelled them
// (nrtActivityLabelNextTask); other host functions are HOST_TASK.
typedef enum {
  NRT_ACTIVITY_HOST_TASK = 0,     // nrtLaunchHostFunc
  NRT_ACTIVITY_DEVICE_OP = 1,     // a named device op (opslib aclnnXxx)
  NRT_ACTIVITY_KERNEL = 2,        // nrtLaunchKernel
  NRT_ACTIVITY_MEMCPY = 3,        // nrtMemcpyAsync; nrtMemcpy too (stream_id 0: ran on the caller)
  NRT_ACTIVITY_MEMSET = 4,        // nrtMemsetAsync
  NRT_ACTIVITY_EVENT_RECORD = 5,  // nrtEventRecord: start == end == the event's completion
  NRT_ACTIVITY_EVENT_WAIT = 6,    // nrtStreamWaitEvent (only when the event was still pending)
  NRT_ACTIVITY_COLLECTIVE = 7,    // a collective or point-to-point transfer
  NRT_ACTIVITY_KIND_RANGE_MIN_ = -0x7fffffff - 1,  // every int32 is a value (see nrtError_t)
  NRT_ACTIVITY_KIND_RANGE_MAX_ = 0x7fffffff,
} nrtActivityKind;

#define NRT_ACTIVITY_NAME_MAX 96

// Timestamps are nanoseconds of nrtActivityTimestamp()'s clock (CLOCK_MONOTONIC); a profiler maps
// them to its own clock with one offset taken when it starts.
typedef struct {
  uint32_t kind;            // nrtActivityKind
  int32_t device;
  uint64_t stream_id;       // the stream's id ("npu:0 stream #3" -> 3); 0 for a synchronous nrtMemcpy
  uint64_t correlation_id;  // the launching thread's innermost correlation id at launch; 0 if none
  uint64_t sequence;        // launch order, unique within one nrtActivityEnable() session
  uint64_t api_start_ns;    // when the launching API call began
  uint64_t enqueue_ns;      // when the task entered its stream's queue
  uint64_t start_ns;        // when the stream began running it
  uint64_t end_ns;          // when it finished
  uint64_t bytes;           // memcpy / memset size
  uint32_t memcpy_kind;     // nrtMemcpyKind of a memcpy
  uint32_t block_dim;       // blocks of a kernel
  uint32_t failed;          // 1 if the task failed
  uint32_t launch_tid;      // OS thread id of the launching thread
  char name[NRT_ACTIVITY_NAME_MAX];  // op / kernel name, or the kind's name; NUL-terminated
} nrtActivityRecord;

// Starts recording every task launched from now on, keeping at most `capacity` finished records
// (0: 1048576) until they are drained; beyond that, records are dropped and counted, never waited
// for. Resets the buffer and the dropped count. With recording off, a task costs one relaxed load.
NRT_API nrtError_t nrtActivityEnable(size_t capacity);
// Stops recording new tasks. Tasks already recorded keep their records; drain them afterwards.
NRT_API nrtError_t nrtActivityDisable(void);
NRT_API int nrtActivityIsEnabled(void);
// Waits until every recorded task has finished (it never touches the streams' sticky errors), or
// `timeout_ms` passes: NRT_ERROR_NOT_READY then, with the number still running in the message.
NRT_API nrtError_t nrtActivityFlush(int64_t timeout_ms);
// Moves up to `capacity` finished records, oldest first, into `records`; `*count` is how many.
NRT_API nrtError_t nrtActivityDrain(nrtActivityRecord* records, size_t capacity, size_t* count);
// Records lost to a full buffer since nrtActivityEnable().
NRT_API uint64_t nrtActivityDropped(void);
// The records' clock, in nanoseconds.
NRT_API uint64_t nrtActivityTimestamp(void);

// Per thread: the id stamped on the tasks this thread launches (a profiler pushes its op's id when
// the op starts and pops it when it ends).
NRT_API void nrtActivityPushCorrelationId(uint64_t id);
NRT_API void nrtActivityPopCorrelationId(void);
// Per thread: kind, name and size (bytes moved, for collectives; 0 otherwise) of the next host function
// this thread launches (nrtLaunchHostFunc). Launchers of named work call it when nrtActivityIsEnabled();
// ignored while recording is off.
NRT_API void nrtActivityLabelNextTask(nrtActivityKind kind, const char* name, uint64_t bytes);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NPU_ACTIVITY_H_

// StreamOrder.h - when a collective needs no event ordering it after its caller's stream. After
// wait(), the caller's stream holds a task that waits for the previous collective; an event recorded
// behind that task would hold the communication stream until the task ends: a hand-off between two
// threads on every collective issued back to back. When only such waits were queued on the caller's
// stream since its last event, the communication stream already runs after all of it.
#pragma once

#include <cstdint>

#include "csrc/core/NPUStream.h"

namespace c10d_npu::stream_order {

// Tasks queued on `stream` so far (its position in its own order).
uint64_t taskCount(const c10_npu::NPUStream& stream);

// True if work queued on `comm` from now on already runs after the first `caller_tasks` tasks of
// `caller` (so a collective needs no event when `caller_tasks` is the caller's current count).
bool ordered(const c10_npu::NPUStream& caller, const c10_npu::NPUStream& comm, uint64_t caller_tasks);

// `comm` now waits (by an event) for the first `caller_tasks` tasks of `caller`.
void noteEvent(const c10_npu::NPUStream& caller, const c10_npu::NPUStream& comm, uint64_t caller_tasks);

// One task was just queued on `caller`, which had `caller_tasks_before` tasks, that only waits for
// work already queued on `comm`: later work on `comm` runs after it too.
void noteWaitFor(const c10_npu::NPUStream& caller, const c10::Stream& comm, uint64_t caller_tasks_before);

}  // namespace c10d_npu::stream_order

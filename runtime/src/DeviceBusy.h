// DeviceBusy.h - how long each device had at least one task running: what nrtGetDeviceUtilization
// reports (the share of the time since the previous query).
#pragma once

#include <cstdint>

namespace npu::runtime::busy {

constexpr int kMaxDevices = 64;

// A stream worker of `device` starts / ends a task (tasks of concurrent streams overlap into one busy span).
void TaskStarted(int device);
void TaskEnded(int device);

// Percent (0-100) of the wall time since the previous call for `device` (or since the runtime started)
// during which a task ran on it.
int UtilizationSinceLastQuery(int device);

}  // namespace npu::runtime::busy

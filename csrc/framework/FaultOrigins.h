// FaultOrigins.h - tells the runtime which ATen op launches each device task while injected faults
// name ops, so that NPU_SIM_FAULT's op=mul matches the aclnnMuls that `x * 2` launches.
#pragma once

#include <string>

namespace at_npu::native {

// Installs a RecordFunction callback that pushes each ATen op as the launch origin of the tasks it
// launches (nrtPushLaunchOrigin), when NPU_SIM_FAULT has a fault with op=; otherwise does nothing,
// and costs nothing.
void installFaultOrigins();

// The runtime's report of faults with op= that have matched no task so far ("" when none).
std::string unmatchedFaults();

}  // namespace at_npu::native

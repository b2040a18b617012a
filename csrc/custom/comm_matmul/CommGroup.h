// CommGroup.h - the hccl group a communication-fused op names (`hcom` / `group_ep`), with the checks every such op
// makes on it.
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <c10/util/string_view.h>

#include <cstdint>

#include "csrc/distributed/ProcessGroupHCCL.h"

namespace at_npu::native::comm {

// The live hccl group of this process named `name` (ProcessGroupHCCL.get_hccl_comm_name); a ValueError naming `op`
// and how to get a name otherwise.
c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> groupNamed(const char* op, c10::string_view name);

// world_size must be the group's size (any size >= 1 when group is null: Meta kernels).
void checkWorldSize(const char* op, int64_t world_size, const c10d_npu::ProcessGroupHCCL* group);

}  // namespace at_npu::native::comm

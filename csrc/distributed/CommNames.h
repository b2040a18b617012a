// CommNames.h - the names of hccl groups (ProcessGroupHCCL::get_hccl_comm_name) and finding a group by its name, as
// torch_npu's communication-fused ops take it (`hcom`).
#pragma once

#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d_npu {

class ProcessGroupHCCL;

// The live group named `name` in this process, or nullptr.
c10::intrusive_ptr<ProcessGroupHCCL> groupByCommName(const std::string& name);

}  // namespace c10d_npu

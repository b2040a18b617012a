// CommGroup.cpp - finding the hccl group a communication-fused op names.
#include "csrc/custom/comm_matmul/CommGroup.h"

#include <c10/util/Exception.h>

#include <string>

#include "csrc/distributed/CommNames.h"

namespace at_npu::native::comm {

c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> groupNamed(const char* op, c10::string_view name) {
  c10::intrusive_ptr<c10d_npu::ProcessGroupHCCL> group = c10d_npu::groupByCommName(std::string(name));
  TORCH_CHECK_VALUE(group, op, ": '", name, "' names no hccl group of this process; pass "
                    "group._get_backend(torch.device('npu')).get_hccl_comm_name(rank)");
  return group;
}

void checkWorldSize(const char* op, int64_t world_size, const c10d_npu::ProcessGroupHCCL* group) {
  TORCH_CHECK_VALUE(world_size >= 1, op, ": world_size must be at least 1, got ", world_size);
  TORCH_CHECK_VALUE(group == nullptr || world_size == group->getSize(), op, ": world_size ", world_size,
                    " is not the size of the named group (", group ? group->getSize() : 0, ")");
}

}  // namespace at_npu::native::comm

// OpCommand.h - EXEC_NPU_CMD(aclnnXxx, args...): the one launch path for named device ops. Converts
// the arguments to descriptors, runs XxxGetWorkspaceSize, allocates the workspace, queues Xxx on the
// current stream and counts the launch in torch.npu.op_stats(). Out-of-tree extensions use the same
// macro against custom op packages.
#pragma once

#include <tuple>

#include "csrc/framework/OpParamMaker.h"

namespace at_npu::native {

// The registry entry for `name`; throws a clear error if no package provides it.
const aclnnOpEntry& findDeviceOp(const char* name);
// Workspace (kept alive by the caching allocator's stream order), launch, and launch-mode handling.
void launchDeviceOp(const aclnnOpEntry& op, uint64_t workspace_size, aclOpExecutor* executor);
[[noreturn]] void throwDeviceOpError(const char* name, const char* phase, aclnnStatus status);
// Sets the launch tag so a failure inside the op names the Python line that launched it.
void tagDeviceOpLaunch();

template <typename... Args>
void execNpuCmd(const char* name, const Args&... args) {
  const aclnnOpEntry& op = findDeviceOp(name);
  auto converted = std::make_tuple(ConvertType(args)...);
  using GetWorkspaceSize = aclnnStatus (*)(decltype(ConvertType(args))..., uint64_t*, aclOpExecutor**);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  tagDeviceOpLaunch();
  const aclnnStatus status = std::apply(
      [&](auto... descriptors) {
        return reinterpret_cast<GetWorkspaceSize>(op.get_workspace_size)(descriptors..., &workspace_size,
                                                                          &executor);
      },
      converted);
  // The executor captured what it needs: descriptors can go now.
  std::apply([](auto... descriptors) { (Release(descriptors), ...); }, converted);
  if (status != ACLNN_SUCCESS) throwDeviceOpError(name, "GetWorkspaceSize", status);
  launchDeviceOp(op, workspace_size, executor);
}

}  // namespace at_npu::native

#define EXEC_NPU_CMD(aclnn_api, ...) ::at_npu::native::execNpuCmd(#aclnn_api, __VA_ARGS__)

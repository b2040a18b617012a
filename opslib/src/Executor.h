// Executor.h - aclOpExecutor: the work an op prepared in XxxGetWorkspaceSize, queued on a stream by
// aclnnLaunchExecutor and run there once.
#ifndef NPU_OPSLIB_SRC_EXECUTOR_H_
#define NPU_OPSLIB_SRC_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "npu/opslib.h"
#include "OperandHooks.h"

struct aclOpExecutor {
  aclOpExecutor(std::string name, int32_t operand_device)
      : op_name(std::move(name)), device(operand_device) {}
  virtual ~aclOpExecutor() = default;
  aclOpExecutor(const aclOpExecutor&) = delete;
  aclOpExecutor& operator=(const aclOpExecutor&) = delete;

  // The op's computation, on the stream's worker. It fails the task by throwing; the exception's
  // what() becomes the reason in "<op> failed: <reason>[ <launch tag>]".
  virtual void Run(void* workspace, uint64_t workspace_size) = 0;

  std::string op_name;  // launch name, "aclnnAdd"
  int32_t device;       // device whose memory the operands live in; -1 when unknown
  // Filled in by the launch.
  std::string launch_tag;
  void* workspace = nullptr;
  uint64_t workspace_size = 0;
  // Only while a dump or overflow detection watches the ops (OperandHooks.h); null otherwise.
  std::unique_ptr<npu::opslib::OperandRecord> operands;
};

namespace npu::opslib {

// An executor whose kernel lives in the same allocation: a launched op costs one block that the
// stream's worker frees, which matters because cross-thread frees contend in malloc.
template <typename Kernel>
struct KernelExecutor final : aclOpExecutor {
  KernelExecutor(std::string name, int32_t operand_device, Kernel k)
      : aclOpExecutor(std::move(name), operand_device), kernel(std::move(k)) {}
  void Run(void* workspace, uint64_t workspace_size) override { kernel(workspace, workspace_size); }
  Kernel kernel;  // captures everything by value: descriptors may be destroyed before it runs
};

// Records an executor as launchable exactly once and hands it out.
aclOpExecutor* RegisterExecutor(std::unique_ptr<aclOpExecutor> executor);

template <typename Kernel>
aclOpExecutor* NewExecutor(std::string op_name, int32_t device, Kernel kernel) {
  return RegisterExecutor(
      std::make_unique<KernelExecutor<Kernel>>(std::move(op_name), device, std::move(kernel)));
}

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_EXECUTOR_H_

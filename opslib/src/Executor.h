// Executor.h - aclOpExecutor: the work an op prepared in XxxGetWorkspaceSize, queued on a stream by
// aclnnLaunchExecutor and run there once.
#ifndef NPU_OPSLIB_SRC_EXECUTOR_H_
#define NPU_OPSLIB_SRC_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "ObjectPool.h"
#include "npu/opslib.h"
#include "OperandHooks.h"

struct aclOpExecutor : npu::opslib::Pooled {
  // `name` must outlive the executor (op names are literals or registry entries).
  aclOpExecutor(const char* name, int32_t operand_device) : op_name(name), device(operand_device) {}
  virtual ~aclOpExecutor() { state.store(kFreed, std::memory_order_relaxed); }
  aclOpExecutor(const aclOpExecutor&) = delete;
  aclOpExecutor& operator=(const aclOpExecutor&) = delete;

  // The op's computation, on the stream's worker. It fails the task by throwing; the exception's
  // what() becomes the reason in "<op> failed: <reason>[ <launch tag>]".
  virtual void Run(void* workspace, uint64_t workspace_size) = 0;

  // Launch-once bookkeeping: an executor is launched or destroyed exactly once. A stale pointer is
  // recognised as long as its memory has not been reused by a newer executor.
  static constexpr uint32_t kMagic = 0x6e707565;  // "npue"
  enum State : uint32_t { kReady = 1, kLaunched = 2, kFreed = 3 };
  const uint32_t magic = kMagic;
  std::atomic<uint32_t> state{kReady};

  const char* op_name;  // launch name, "aclnnAdd"
  int32_t device;       // device whose memory the operands live in; -1 when unknown
  // Filled in by the launch: the launch tag, kept by pointer when the adapter promised it lives
  // for the process (aclnnSetLaunchTagStatic), else copied.
  const char* static_tag = nullptr;
  std::string launch_tag;
  const char* Tag() const { return static_tag ? static_tag : launch_tag.c_str(); }
  void* workspace = nullptr;
  uint64_t workspace_size = 0;
  // Set for elementwise kernels of up to kShortRunElements (NewElementwiseExecutor): their run costs
  // less than the hand-off to the stream's worker, so the launch runs them on the calling thread
  // when the stream is idle.
  bool short_run = false;
  // Only while a dump or overflow detection watches the ops (OperandHooks.h); null otherwise.
  std::unique_ptr<npu::opslib::OperandRecord> operands;
};

namespace npu::opslib {

// An executor whose kernel lives in the same (pooled) block: a launched op costs no allocation
// once the pool is warm.
template <typename Kernel>
struct KernelExecutor final : aclOpExecutor {
  KernelExecutor(const char* name, int32_t operand_device, Kernel k)
      : aclOpExecutor(name, operand_device), kernel(std::move(k)) {}
  void Run(void* workspace, uint64_t workspace_size) override { kernel(workspace, workspace_size); }
  Kernel kernel;  // captures everything by value: descriptors may be destroyed before it runs
};

template <typename Kernel>
aclOpExecutor* NewExecutor(const char* op_name, int32_t device, Kernel kernel) {
  NoteExecutorCreated();  // hands the preparation's operand flags to this executor
  return new KernelExecutor<Kernel>(op_name, device, std::move(kernel));
}

// Elementwise ops up to this many elements are short runs (aclOpExecutor::short_run).
constexpr int64_t kShortRunElements = 1024;

// Claims an executor for its one launch or destruction; false if it is not a ready executor.
bool TakeReady(aclOpExecutor* executor);

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_EXECUTOR_H_

// AtenOpSupport.h - plumbing of the ATen-backed op package: descriptors -> CPU tensors over device
// memory, the GetWorkspaceSize wrapper, and the executor that runs an op's kernel on the stream.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <npu/format_layout.h>
#include <npu/op_signature.h>
#include <npu/opslib.h>

#include "AclDataType.h"

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npu::opslib::aten {

at::ScalarType toScalarType(aclDataType type);  // throws for ACL_DT_UNDEFINED
// The tensor a descriptor describes, as a CPU tensor over the same (host-addressable) device
// memory; no copy, no ownership. NULL -> undefined tensor. The non-const overload is for operands
// the op writes (its signature's aclTensor*): it marks them (aclIsOutputTensor).
// A private-format operand (NC1HWC0, FRACTAL_Z, FRACTAL_NZ...) is staged instead: a CPU tensor of
// its logical shape, filled from the device storage when the kernel starts and, for written
// operands, converted back into the device storage when it ends.
at::Tensor hostTensor(const aclTensor* tensor);
at::Tensor hostTensor(aclTensor* tensor);
// Like hostTensor, for a required argument: NULL is an error naming it.
at::Tensor requiredTensor(const aclTensor* tensor, const char* what);
at::Tensor requiredTensor(aclTensor* tensor, const char* what);
std::vector<at::Tensor> hostTensors(const aclTensorList* list);
c10::List<std::optional<at::Tensor>> hostOptionalTensors(const aclTensorList* list);
at::Scalar hostScalar(const aclScalar* scalar);  // NULL is an error
std::vector<int64_t> intArray(const aclIntArray* array);  // NULL -> empty
// "Float[2, 3]" per tensor: the inputs named in a failing kernel's error.
std::string describeTensors(const std::vector<at::Tensor>& tensors);

// The error text of a kernel's exception, without C++ backtraces.
std::string kernelErrorText(const std::exception& e);

// What prepare() returns: the inputs (named on failure), the kernel, and the tensors it writes
// (inputs and outputs are what data dumps and overflow detection look at; undefined ones are
// skipped).
struct Prepared {
  std::vector<at::Tensor> inputs;
  std::function<void()> kernel;
  std::vector<at::Tensor> outputs;
};

// A private-format operand of an op: its device storage, and the CPU tensor the kernel reads and
// writes instead (see hostTensor).
struct StagedOperand {
  npu::formats::Layout device_layout;
  void* device = nullptr;
  at::Tensor host;  // contiguous, the logical shape
  bool written = false;
  // The caller's descriptor: valid during prepare() only (the operand hooks describe the device
  // storage with it, as the staging tensor is filled only when the kernel starts).
  const aclTensor* descriptor = nullptr;
};

// While alive, hostTensor() on this thread stages private-format operands into `staged`.
class StagingScope {
 public:
  explicit StagingScope(std::vector<StagedOperand>* staged);
  ~StagingScope();
  StagingScope(const StagingScope&) = delete;
  StagingScope& operator=(const StagingScope&) = delete;

 private:
  std::vector<StagedOperand>* previous_;
};

// Boxes `kernel` (a no-argument callable capturing its tensors by value) into an executor; the
// staged operands are loaded before it runs and the written ones stored back after.
aclnnStatus wrapKernel(const char* name, Prepared prepared, aclOpExecutor** executor,
                       std::vector<StagedOperand> staged = {});

// The body of every XxxGetWorkspaceSize: `prepare()` checks the arguments and returns the
// kernel (throwing on bad arguments: ACLNN_ERR_PARAM_INVALID with the reason as recent error);
// `inputs` are named in the error of a kernel that fails on the stream. No workspace is needed.
template <typename Prepare>
aclnnStatus prepareOp(const char* name, uint64_t* workspace_size, aclOpExecutor** executor,
                      Prepare prepare) {
  if (workspace_size == nullptr || executor == nullptr) {
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_NULLPTR,
                                (std::string(name) + ": workspaceSize or executor is NULL").c_str());
  }
  try {
    std::vector<StagedOperand> staged;
    StagingScope scope(&staged);
    Prepared prepared = prepare();
    *workspace_size = 0;
    return wrapKernel(name, std::move(prepared), executor, std::move(staged));
  } catch (const std::exception& e) {
    const std::string message = std::string(name) + ": " + kernelErrorText(e);
    return aclnnSetRecentErrMsg(ACLNN_ERR_PARAM_INVALID, message.c_str());
  }
}

// Registers aclnn<Name>GetWorkspaceSize / aclnn<Name> as "aclnn<Name>" while the library loads.
struct BuiltinOp {
  BuiltinOp(const char* name, void* get_workspace_size, void* launch, const char* param_kinds,
            const char* param_names);
};

}  // namespace npu::opslib::aten

// Defines aclnn<Name> (the shared launch) and registers the op with its parameters' names ("self,
// out"); aclnn<Name>GetWorkspaceSize is written by hand next to it.
#define NPU_ATEN_OP(Name, param_names)                                                         \
  extern "C" NOP_API aclnnStatus aclnn##Name(void* workspace, uint64_t workspace_size,          \
                                             aclOpExecutor* executor, nrtStream_t stream) {    \
    return aclnnLaunchExecutor(workspace, workspace_size, executor, stream);                   \
  }                                                                                             \
  static const ::npu::opslib::aten::BuiltinOp npu_aten_op_##Name(                              \
      "aclnn" #Name, reinterpret_cast<void*>(&aclnn##Name##GetWorkspaceSize),                  \
      reinterpret_cast<void*>(&aclnn##Name),                                                   \
      NPU_OPSLIB_PARAM_KINDS(aclnn##Name##GetWorkspaceSize, param_names), param_names)

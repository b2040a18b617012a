// OpRegistry.h - built-in op registration (one static registrar per op) and the registry behind
// aclnnFindOp: built-ins plus custom packages from ASCEND_CUSTOM_OPP_PATH, custom ones winning.
#ifndef NPU_OPSLIB_SRC_OP_REGISTRY_H_
#define NPU_OPSLIB_SRC_OP_REGISTRY_H_

#include "npu/op_signature.h"
#include "npu/opslib.h"

namespace npu::opslib {

// Adds a built-in op while the library loads; the registry is assembled on first lookup, after
// every static registrar has run.
struct OpRegistrar {
  OpRegistrar(const char* name, void* get_workspace_size, void* launch, const char* param_kinds,
              const char* param_names);
};

}  // namespace npu::opslib

// NPU_OPSLIB_DEFINE_OP(Add, "self, other, alpha, out") defines the launch phase aclnnAdd (every
// built-in op queues the executor its aclnnAddGetWorkspaceSize prepared) and registers the pair as
// "aclnnAdd" with its parameters' kinds and names (checked at compile time against the function).
#define NPU_OPSLIB_DEFINE_OP(Name, param_names)                                             \
  extern "C" aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,               \
                                     aclOpExecutor* executor, nrtStream_t stream) {         \
    return aclnnLaunchExecutor(workspace, workspaceSize, executor, stream);                 \
  }                                                                                         \
  static const ::npu::opslib::OpRegistrar npu_opslib_registrar_##Name(                      \
      "aclnn" #Name, reinterpret_cast<void*>(&aclnn##Name##GetWorkspaceSize),               \
      reinterpret_cast<void*>(&aclnn##Name),                                                \
      NPU_OPSLIB_PARAM_KINDS(aclnn##Name##GetWorkspaceSize, param_names), param_names)

#endif  // NPU_OPSLIB_SRC_OP_REGISTRY_H_

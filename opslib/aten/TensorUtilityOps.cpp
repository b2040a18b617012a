// TensorUtilityOps.cpp - InplaceOne (fill with 1), the device op of torch_npu's one_.

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

extern "C" NOP_API aclnnStatus aclnnInplaceOneGetWorkspaceSize(aclTensor* selfRef, uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceOne", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(selfRef, "self");
    return Prepared{{a}, [=]() mutable { a.fill_(1); }, {a}};
  });
}
NPU_ATEN_OP(InplaceOne, "selfRef");

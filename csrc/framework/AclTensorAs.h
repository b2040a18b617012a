// AclTensorAs.h - a tensor whose bytes hold a format torch has no dtype for, passed to a device op described with
// that format's aclDataType (a uint8 tensor of hifloat8 codes as ACL_HIFLOAT8), as the device op reads it.
#pragma once

#include <ATen/core/Tensor.h>
#include <npu/opslib.h>

namespace at_npu::native {

struct AclTensorAs {
  const at::Tensor& tensor;
  aclDataType dtype;
};

// EXEC_NPU_CMD finds this by argument-dependent lookup. The tensor's dtype must hold the format (uint8 for
// hifloat8) or be the format itself (a plain descriptor).
aclTensor* ConvertType(const AclTensorAs& operand);

}  // namespace at_npu::native

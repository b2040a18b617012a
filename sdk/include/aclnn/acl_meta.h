/* aclnn/acl_meta.h - descriptor types (aclTensor, aclScalar, aclIntArray, ...) for op API headers. */
#ifndef TORCH_NPU_ACL_META_H_
#define TORCH_NPU_ACL_META_H_

#include "npu/opslib.h"

#endif

/* aclnn/aclnn_base.h - the op library's C API under the name op API headers include: descriptors,
   accessors, executors, aclnnStatus. */
#ifndef TORCH_NPU_ACLNN_BASE_H_
#define TORCH_NPU_ACLNN_BASE_H_

#include "npu/opslib.h"

#endif

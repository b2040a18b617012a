/* aclnn_add_custom.h - the op API of AddCustom: out = x + y (same shape and dtype; FLOAT, FLOAT16 or
   INT32; contiguous). Installed as vendors/<vendor>/op_api/include/aclnn_add_custom.h. */
#ifndef ACLNN_ADD_CUSTOM_H_
#define ACLNN_ADD_CUSTOM_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one: checks the operands and prepares the work; the executor is launched by aclnnAddCustom. */
__attribute__((visibility("default"))) aclnnStatus aclnnAddCustomGetWorkspaceSize(
    const aclTensor* x, const aclTensor* y, const aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor);

/* Phase two: queues the work on `stream`. */
__attribute__((visibility("default"))) aclnnStatus aclnnAddCustom(void* workspace, uint64_t workspaceSize,
                                                                  aclOpExecutor* executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_ADD_CUSTOM_H_ */

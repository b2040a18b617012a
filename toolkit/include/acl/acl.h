/* acl/acl.h - ACL's entry header: initialisation, version, and the runtime API (acl_rt.h). */
#ifndef TORCH_NPU_TOOLKIT_ACL_H_
#define TORCH_NPU_TOOLKIT_ACL_H_

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_MAJOR_VERSION 1
#define ACL_MINOR_VERSION 0
#define ACL_PATCH_VERSION 0

/* Starts ACL for the process. configPath (may be NULL or "") names an acl.json, which must exist
   and hold a JSON object. A second aclInit before aclFinalize returns ACL_ERROR_REPEAT_INITIALIZE. */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
/* Waits for the queued work, then releases streams, events and memory (nrtFinalize). */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);
/* The ACL interface version of this library (ACL_MAJOR_VERSION ...). */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion);

#ifdef __cplusplus
}
#endif

#endif

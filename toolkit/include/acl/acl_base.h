/* acl/acl_base.h - ACL's base types and error codes, as CANN's toolkit spells them, over the software
   NPU. The element types and formats are the op library's (values as in ACL). */
#ifndef TORCH_NPU_TOOLKIT_ACL_BASE_H_
#define TORCH_NPU_TOOLKIT_ACL_BASE_H_

#include <stddef.h>
#include <stdint.h>

#include "npu/opslib.h"
#include "npu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ACL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define ACL_FUNC_VISIBILITY
#endif

typedef int aclError;
typedef uint16_t aclFloat16;
typedef void* aclrtEvent;
typedef void* aclrtContext;

static const int ACL_ERROR_NONE = 0;
static const int ACL_SUCCESS = 0;

/* Caller errors. */
static const int ACL_ERROR_INVALID_PARAM = 100000;
static const int ACL_ERROR_UNINITIALIZE = 100001;
static const int ACL_ERROR_REPEAT_INITIALIZE = 100002;
static const int ACL_ERROR_INVALID_FILE = 100003;
static const int ACL_ERROR_WRITE_FILE = 100004;
static const int ACL_ERROR_INVALID_FILE_SIZE = 100005;
static const int ACL_ERROR_PARSE_FILE = 100006;

/* Resource errors. */
static const int ACL_ERROR_BAD_ALLOC = 200000;
static const int ACL_ERROR_API_NOT_SUPPORT = 200001;
static const int ACL_ERROR_INVALID_DEVICE = 200002;

/* Internal errors. */
static const int ACL_ERROR_INTERNAL_ERROR = 500000;
static const int ACL_ERROR_FAILURE = 500001;
static const int ACL_ERROR_RT_FAILURE = 500003;

/* Runtime errors (CANN's rt_error_codes.h values). */
static const int ACL_ERROR_RT_PARAM_INVALID = 107000;
static const int ACL_ERROR_RT_INVALID_DEVICEID = 107001;
static const int ACL_ERROR_RT_CONTEXT_NULL = 107002;
static const int ACL_ERROR_RT_INVALID_HANDLE = 107017;
static const int ACL_ERROR_RT_DEVICE_TASK_ABORT = 107022;
static const int ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207000;
static const int ACL_ERROR_RT_MEMORY_ALLOCATION = 207001;
static const int ACL_ERROR_RT_INTERNAL_ERROR = 507000;
static const int ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507004;
static const int ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006;
static const int ACL_ERROR_RT_LOST_HEARTBEAT = 507010;
static const int ACL_ERROR_RT_AICORE_TIMEOUT = 507014;
static const int ACL_ERROR_RT_AICORE_EXCEPTION = 507015;

/* The message of the calling thread's last failed call ("" when none). */
ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void);

/* Size in bytes of one element of `dataType` (0 for types the op library does not know). */
ACL_FUNC_VISIBILITY size_t aclDataTypeSize(aclDataType dataType);

#ifdef __cplusplus
}
#endif

#endif

// AclError.cpp - the runtime's error codes as ACL reports them, and aclGetRecentErrMsg.
#include "AclError.h"

namespace npu::toolkit {
namespace {

thread_local std::string recent_message;

aclError CodeOf(nrtError_t error) {
  switch (error) {
    case NRT_SUCCESS: return ACL_SUCCESS;
    case NRT_ERROR_INVALID_VALUE:
    case NRT_ERROR_INVALID_POINTER:
    case NRT_ERROR_INVALID_MEMCPY_KIND: return ACL_ERROR_RT_PARAM_INVALID;
    case NRT_ERROR_INVALID_DEVICE: return ACL_ERROR_RT_INVALID_DEVICEID;
    case NRT_ERROR_OUT_OF_MEMORY: return ACL_ERROR_RT_MEMORY_ALLOCATION;
    case NRT_ERROR_INVALID_HANDLE: return ACL_ERROR_RT_INVALID_HANDLE;
    case NRT_ERROR_NOT_READY: return ACL_ERROR_RT_EVENT_NOT_COMPLETE;
    case NRT_ERROR_TASK_FAILED: return ACL_ERROR_RT_AICORE_EXCEPTION;
    case NRT_ERROR_NOT_INITIALIZED: return ACL_ERROR_UNINITIALIZE;
    case NRT_ERROR_EVENT_NOT_RECORDED: return ACL_ERROR_RT_PARAM_INVALID;
    case NRT_ERROR_TASK_TIMEOUT: return ACL_ERROR_RT_AICORE_TIMEOUT;
    case NRT_ERROR_DEVICE_LOST: return ACL_ERROR_RT_LOST_HEARTBEAT;
    case NRT_ERROR_CAPTURE_UNSUPPORTED: return ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    default: return ACL_ERROR_RT_INTERNAL_ERROR;
  }
}

}  // namespace

aclError FromRuntime(nrtError_t error) {
  if (error == NRT_SUCCESS) return ACL_SUCCESS;
  recent_message = nrtGetRecentErrMsg();
  return CodeOf(error);
}

aclError Fail(aclError code, const std::string& message) {
  recent_message = message;
  return code;
}

}  // namespace npu::toolkit

extern "C" const char* aclGetRecentErrMsg(void) { return npu::toolkit::recent_message.c_str(); }

// AclDevice.cpp - devices and contexts. A context is one of a fixed set of per-device tokens: making
// it current selects its device, as the software NPU has one context per device.
#include <string>

#include "AclError.h"
#include "acl/acl_rt.h"

using npu::toolkit::Fail;
using npu::toolkit::FromRuntime;

namespace {

constexpr int kMaxDevices = 1024;
char context_tokens[kMaxDevices];  // context of device d: &context_tokens[d]

bool ContextDevice(aclrtContext context, int32_t* device) {
  const char* token = static_cast<const char*>(context);
  if (token < context_tokens || token >= context_tokens + kMaxDevices) return false;
  *device = static_cast<int32_t>(token - context_tokens);
  return true;
}

aclError CheckDevice(const char* call, int32_t device) {
  int32_t count = 0;
  if (aclError error = FromRuntime(nrtGetDeviceCount(&count))) return error;
  if (device < 0 || device >= count || device >= kMaxDevices) {
    return Fail(ACL_ERROR_RT_INVALID_DEVICEID, std::string(call) + ": device " + std::to_string(device) +
                                                   " does not exist (" + std::to_string(count) + " devices)");
  }
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclrtSetDevice(int32_t deviceId) { return FromRuntime(nrtSetDevice(deviceId)); }

aclError aclrtResetDevice(int32_t deviceId) {
  if (aclError error = CheckDevice("aclrtResetDevice", deviceId)) return error;
  int32_t current = 0;
  if (aclError error = FromRuntime(nrtGetDevice(&current))) return error;
  if (aclError error = FromRuntime(nrtSetDevice(deviceId))) return error;
  const aclError error = FromRuntime(nrtDeviceSynchronize());
  nrtSetDevice(current);
  return error;
}

aclError aclrtGetDevice(int32_t* deviceId) {
  if (deviceId == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
  return FromRuntime(nrtGetDevice(deviceId));
}

aclError aclrtGetDeviceCount(uint32_t* count) {
  if (count == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
  int32_t n = 0;
  if (aclError error = FromRuntime(nrtGetDeviceCount(&n))) return error;
  *count = static_cast<uint32_t>(n);
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) { return FromRuntime(nrtDeviceSynchronize()); }

aclError aclrtGetRunMode(aclrtRunMode* runMode) {
  if (runMode == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
  *runMode = ACL_HOST;  // the program runs on the host and drives the device, as on a server
  return ACL_SUCCESS;
}

const char* aclrtGetSocName(void) {
  const char* name = nullptr;
  return FromRuntime(nrtGetSocName(&name)) == ACL_SUCCESS ? name : nullptr;
}

aclError aclrtDeviceCanAccessPeer(int32_t* canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  if (canAccessPeer == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtDeviceCanAccessPeer: canAccessPeer is NULL");
  }
  if (aclError error = CheckDevice("aclrtDeviceCanAccessPeer", deviceId)) return error;
  if (aclError error = CheckDevice("aclrtDeviceCanAccessPeer", peerDeviceId)) return error;
  *canAccessPeer = deviceId != peerDeviceId ? 1 : 0;  // all devices share one host: peers see each other
  return ACL_SUCCESS;
}

aclError aclrtCreateContext(aclrtContext* context, int32_t deviceId) {
  if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateContext: context is NULL");
  if (aclError error = CheckDevice("aclrtCreateContext", deviceId)) return error;
  if (aclError error = FromRuntime(nrtSetDevice(deviceId))) return error;  // ACL makes it current
  *context = &context_tokens[deviceId];
  return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
  int32_t device = 0;
  if (!ContextDevice(context, &device)) {
    return Fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtDestroyContext: not a context from aclrtCreateContext");
  }
  return ACL_SUCCESS;
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  int32_t device = 0;
  if (!ContextDevice(context, &device)) {
    return Fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtSetCurrentContext: not a context from aclrtCreateContext");
  }
  return FromRuntime(nrtSetDevice(device));
}

aclError aclrtGetCurrentContext(aclrtContext* context) {
  if (context == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetCurrentContext: context is NULL");
  int32_t device = 0;
  if (aclError error = FromRuntime(nrtGetDevice(&device))) return error;
  *context = &context_tokens[device];
  return ACL_SUCCESS;
}

}  // extern "C"

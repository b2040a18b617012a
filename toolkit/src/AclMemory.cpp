// AclMemory.cpp - device and host memory, copies and fills, with ACL's destMax / maxCount checks.
#include <string>

#include "AclError.h"
#include "acl/acl_rt.h"

using npu::toolkit::Fail;
using npu::toolkit::FromRuntime;

namespace {

bool OnDevice(const void* ptr) {
  int32_t device = 0;
  return ptr != nullptr && nrtPointerGetDevice(ptr, &device) == NRT_SUCCESS;
}

aclError ToRuntimeKind(const char* call, aclrtMemcpyKind kind, const void* dst, const void* src,
                       nrtMemcpyKind* out) {
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: *out = NRT_MEMCPY_HOST_TO_HOST; return ACL_SUCCESS;
    case ACL_MEMCPY_HOST_TO_DEVICE: *out = NRT_MEMCPY_HOST_TO_DEVICE; return ACL_SUCCESS;
    case ACL_MEMCPY_DEVICE_TO_HOST: *out = NRT_MEMCPY_DEVICE_TO_HOST; return ACL_SUCCESS;
    case ACL_MEMCPY_DEVICE_TO_DEVICE: *out = NRT_MEMCPY_DEVICE_TO_DEVICE; return ACL_SUCCESS;
    case ACL_MEMCPY_DEFAULT: {
      const bool d = OnDevice(dst), s = OnDevice(src);
      *out = d ? (s ? NRT_MEMCPY_DEVICE_TO_DEVICE : NRT_MEMCPY_HOST_TO_DEVICE)
               : (s ? NRT_MEMCPY_DEVICE_TO_HOST : NRT_MEMCPY_HOST_TO_HOST);
      return ACL_SUCCESS;
    }
  }
  return Fail(ACL_ERROR_INVALID_PARAM, std::string(call) + ": unknown aclrtMemcpyKind " +
                                           std::to_string(static_cast<int>(kind)));
}

aclError CheckFits(const char* call, const char* what, size_t count, size_t max) {
  if (count <= max) return ACL_SUCCESS;
  return Fail(ACL_ERROR_INVALID_PARAM, std::string(call) + ": count " + std::to_string(count) +
                                           " is larger than " + what + " " + std::to_string(max));
}

}  // namespace

extern "C" {

aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: devPtr is NULL");
  if (size == 0) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMalloc: size is 0");
  if (static_cast<int>(policy) < 0 || policy > ACL_MEM_MALLOC_NORMAL_ONLY_P2P) {
    return Fail(ACL_ERROR_INVALID_PARAM,
                "aclrtMalloc: unknown aclrtMemMallocPolicy " + std::to_string(static_cast<int>(policy)));
  }
  return FromRuntime(nrtMalloc(devPtr, size));  // page kinds mean nothing here: one kind of memory
}

aclError aclrtMallocAlign32(void** devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return aclrtMalloc(devPtr, size, policy);  // allocations are page aligned
}

aclError aclrtFree(void* devPtr) {
  if (devPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
  return FromRuntime(nrtFree(devPtr));
}

aclError aclrtMallocHost(void** hostPtr, size_t size) {
  if (hostPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtMallocHost: hostPtr is NULL");
  return FromRuntime(nrtMallocHost(hostPtr, size));
}

aclError aclrtFreeHost(void* hostPtr) {
  if (hostPtr == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
  return FromRuntime(nrtFreeHost(hostPtr));
}

aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  if (aclError error = CheckFits("aclrtMemsetAsync", "maxCount", count, maxCount)) return error;
  return FromRuntime(nrtMemsetAsync(devPtr, value, count, stream));
}

aclError aclrtMemset(void* devPtr, size_t maxCount, int32_t value, size_t count) {
  if (aclError error = CheckFits("aclrtMemset", "maxCount", count, maxCount)) return error;
  // Synchronous, after the work already queued on the default stream.
  if (aclError error = FromRuntime(nrtMemsetAsync(devPtr, value, count, nullptr))) return error;
  return FromRuntime(nrtStreamSynchronize(nullptr));
}

aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind) {
  if (aclError error = CheckFits("aclrtMemcpy", "destMax", count, destMax)) return error;
  nrtMemcpyKind runtime_kind;
  if (aclError error = ToRuntimeKind("aclrtMemcpy", kind, dst, src, &runtime_kind)) return error;
  return FromRuntime(nrtMemcpy(dst, src, count, runtime_kind));
}

aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  if (aclError error = CheckFits("aclrtMemcpyAsync", "destMax", count, destMax)) return error;
  nrtMemcpyKind runtime_kind;
  if (aclError error = ToRuntimeKind("aclrtMemcpyAsync", kind, dst, src, &runtime_kind)) return error;
  return FromRuntime(nrtMemcpyAsync(dst, src, count, runtime_kind, stream));
}

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetMemInfo: free or total is NULL");
  }
  switch (attr) {
    case ACL_HBM_MEM:
    case ACL_HBM_MEM_HUGE:
    case ACL_HBM_MEM_NORMAL:
    case ACL_HBM_MEM_P2P_HUGE:
    case ACL_HBM_MEM_P2P_NORMAL: return FromRuntime(nrtMemGetInfo(free, total));
    case ACL_DDR_MEM:
    case ACL_DDR_MEM_HUGE:
    case ACL_DDR_MEM_NORMAL:
    case ACL_DDR_MEM_P2P_HUGE:
    case ACL_DDR_MEM_P2P_NORMAL: return FromRuntime(nrtHostMemGetInfo(free, total));
  }
  return Fail(ACL_ERROR_INVALID_PARAM,
              "aclrtGetMemInfo: unknown aclrtMemAttr " + std::to_string(static_cast<int>(attr)));
}

}  // extern "C"

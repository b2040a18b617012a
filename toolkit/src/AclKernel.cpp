// AclKernel.cpp - kernel binaries and launches. On the software NPU a kernel binary is a host shared
// library and a kernel one of its functions `int kernel(void* args)`, run once per block on the
// device's simulated cores (nrtLaunchKernel), with GetBlockIdx() telling the block.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>

#include "AclError.h"
#include "acl/acl_rt.h"
#include "npu/kernel_launch.h"

using npu::toolkit::Fail;
using npu::toolkit::FromRuntime;

namespace {

struct Function {
  std::string name;
  nrtKernelBlockFn block;
};

struct Binary {
  void* library;
  std::string path;
  std::mutex mu;
  std::list<Function> functions;  // stable addresses: the handles point into it
};

}  // namespace

extern "C" {

aclError aclrtBinaryLoadFromFile(const char* binPath, aclrtBinaryLoadOptions* options, aclrtBinHandle* binHandle) {
  (void)options;
  if (binPath == nullptr || binHandle == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtBinaryLoadFromFile: binPath or binHandle is NULL");
  }
  void* library = dlopen(binPath, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return Fail(ACL_ERROR_INVALID_FILE, std::string("aclrtBinaryLoadFromFile: cannot load ") + binPath +
                                            " (a kernel binary of the software NPU is a host shared "
                                            "library): " + (why ? why : "unknown error"));
  }
  *binHandle = new Binary{library, binPath, {}, {}};
  return ACL_SUCCESS;
}

aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
  if (binHandle == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtBinaryUnLoad: binHandle is NULL");
  // Launches already queued may still run its code: wait for them first.
  if (aclError error = FromRuntime(nrtDeviceSynchronize())) return error;
  Binary* binary = static_cast<Binary*>(binHandle);
  dlclose(binary->library);
  delete binary;
  return ACL_SUCCESS;
}

aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName, aclrtFuncHandle* funcHandle) {
  if (binHandle == nullptr || kernelName == nullptr || funcHandle == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtBinaryGetFunction: binHandle, kernelName or funcHandle is NULL");
  }
  Binary* binary = static_cast<Binary*>(binHandle);
  void* symbol = dlsym(binary->library, kernelName);
  if (symbol == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, std::string("aclrtBinaryGetFunction: ") + binary->path +
                                             " has no kernel named " + kernelName +
                                             " (export it with extern \"C\")");
  }
  std::lock_guard<std::mutex> lock(binary->mu);
  binary->functions.push_back(Function{kernelName, reinterpret_cast<nrtKernelBlockFn>(symbol)});
  *funcHandle = &binary->functions.back();
  return ACL_SUCCESS;
}

aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void* argsData, size_t argsSize,
                           aclrtStream stream) {
  if (funcHandle == nullptr) return Fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchKernel: funcHandle is NULL");
  if (argsSize != 0 && argsData == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtLaunchKernel: argsData is NULL but argsSize is not 0");
  }
  const Function* function = static_cast<const Function*>(funcHandle);
  // The arguments are read when the stream reaches the launch: copy them now, as ACL does.
  void* copy = std::malloc(argsSize == 0 ? 1 : argsSize);
  if (copy == nullptr) return Fail(ACL_ERROR_BAD_ALLOC, "aclrtLaunchKernel: out of host memory");
  if (argsSize != 0) std::memcpy(copy, argsData, argsSize);
  return FromRuntime(nrtLaunchKernel(function->name.c_str(), blockDim, stream, function->block, copy, &std::free));
}

}  // extern "C"

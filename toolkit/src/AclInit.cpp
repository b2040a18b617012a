// AclInit.cpp - aclInit / aclFinalize, the interface version and aclDataTypeSize.
#include <atomic>
#include <fstream>
#include <sstream>

#include "AclError.h"
#include "acl/acl.h"

using npu::toolkit::Fail;
using npu::toolkit::FromRuntime;

namespace {

std::atomic<bool> initialized{false};

// CANN reads dump, profiling and device settings from this file; the software NPU only checks that
// it is there and is a JSON object, so a wrong path fails here as it would on hardware.
aclError CheckConfig(const char* path) {
  if (path == nullptr || *path == '\0') return ACL_SUCCESS;
  std::ifstream file(path);
  if (!file) {
    return Fail(ACL_ERROR_INVALID_FILE, std::string("aclInit: cannot open the config file ") + path +
                                            "; pass an existing acl.json, or NULL for none");
  }
  std::stringstream text;
  text << file.rdbuf();
  const std::string s = text.str();
  const size_t first = s.find_first_not_of(" \t\r\n");
  const size_t last = s.find_last_not_of(" \t\r\n");
  if (first == std::string::npos || s[first] != '{' || s[last] != '}') {
    return Fail(ACL_ERROR_PARSE_FILE, std::string("aclInit: ") + path + " is not a JSON object");
  }
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclInit(const char* configPath) {
  if (aclError error = CheckConfig(configPath)) return error;
  if (initialized.exchange(true)) {
    return Fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: ACL is already initialised; call aclFinalize first");
  }
  const aclError error = FromRuntime(nrtInit());
  if (error != ACL_SUCCESS) initialized = false;
  return error;
}

aclError aclFinalize(void) {
  if (!initialized.exchange(false)) {
    return Fail(ACL_ERROR_UNINITIALIZE, "aclFinalize: ACL is not initialised (call aclInit first)");
  }
  return FromRuntime(nrtFinalize());
}

aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion) {
  if (majorVersion == nullptr || minorVersion == nullptr || patchVersion == nullptr) {
    return Fail(ACL_ERROR_INVALID_PARAM, "aclrtGetVersion: an output pointer is NULL");
  }
  *majorVersion = ACL_MAJOR_VERSION;
  *minorVersion = ACL_MINOR_VERSION;
  *patchVersion = ACL_PATCH_VERSION;
  return ACL_SUCCESS;
}

size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_BOOL:
    case ACL_INT8:
    case ACL_UINT8: return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16: return 2;
    case ACL_FLOAT:
    case ACL_INT32: return 4;
    case ACL_INT64:
    case ACL_DOUBLE: return 8;
    default: return 0;
  }
}

}  // extern "C"

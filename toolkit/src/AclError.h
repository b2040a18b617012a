// AclError.h - ACL error codes for the runtime's errors, and the message aclGetRecentErrMsg returns.
#pragma once

#include <string>

#include "acl/acl_base.h"

namespace npu::toolkit {

// The ACL code of a runtime error; the runtime's message becomes the thread's recent message.
aclError FromRuntime(nrtError_t error);
// Fails a call with `code` and `message` (the thread's recent message from now on).
aclError Fail(aclError code, const std::string& message);

}  // namespace npu::toolkit

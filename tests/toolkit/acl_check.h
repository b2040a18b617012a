/* acl_check.h - CHECK(call): the test programs return 1 from main on the first failed ACL call,
   naming the call, its code and aclGetRecentErrMsg(). */
#ifndef TESTS_TOOLKIT_ACL_CHECK_H_
#define TESTS_TOOLKIT_ACL_CHECK_H_

#include <stdio.h>

#include "acl/acl.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    aclError err_ = (call);                                                           \
    if (err_ != ACL_SUCCESS) {                                                        \
      fprintf(stderr, "%s failed: %d %s\n", #call, err_, aclGetRecentErrMsg());        \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

#endif

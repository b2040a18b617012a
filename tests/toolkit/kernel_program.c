/* kernel_program.c - loads kernel_binary's library with aclrtBinaryLoadFromFile and launches its
   kernel on 4 blocks with aclrtLaunchKernel; prints the checked result. */
#include <stdio.h>

#include "acl/acl.h"
#include "acl_check.h"
#include "scale_args.h"


int main(int argc, char** argv) {
  if (argc != 2) return 2;
  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = NULL;
  CHECK(aclrtCreateStream(&stream));
  enum { N = 1000 };
  float host[N];
  for (int i = 0; i < N; ++i) host[i] = (float)i;
  void* dev = NULL;
  CHECK(aclrtMalloc(&dev, sizeof(host), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(dev, sizeof(host), host, sizeof(host), ACL_MEMCPY_DEFAULT));
  aclrtBinHandle binary = NULL;
  CHECK(aclrtBinaryLoadFromFile(argv[1], NULL, &binary));
  aclrtFuncHandle kernel = NULL;
  CHECK(aclrtBinaryGetFunction(binary, "scale_kernel", &kernel));
  aclrtFuncHandle missing = NULL;
  aclError not_found = aclrtBinaryGetFunction(binary, "no_such_kernel", &missing);
  struct ScaleArgs args = {(float*)dev, N, 3.0f};
  CHECK(aclrtLaunchKernel(kernel, 4, &args, sizeof(args), stream));
  args.factor = 100.0f;  /* the launch copied its arguments */
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(host, sizeof(host), dev, sizeof(host), ACL_MEMCPY_DEVICE_TO_HOST));
  int wrong = 0;
  for (int i = 0; i < N; ++i) wrong += host[i] != 3.0f * (float)i;
  printf("wrong=%d not_found=%d\n", wrong, not_found);
  CHECK(aclrtBinaryUnLoad(binary));
  CHECK(aclrtFree(dev));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclFinalize());
  return 0;
}

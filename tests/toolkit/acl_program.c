/* acl_program.c - an ACL program as CANN's samples write one: device, stream, memory, copies, an
   aclnn op (two-phase), events and a host function. Prints the sums it checks; exits non-zero on
   the first failed call, naming it. */
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"
#include "acl_check.h"
#include "aclnnop/aclnn_add.h"


static void on_stream(void* args) { *(int*)args = 42; }

int main(void) {
  CHECK(aclInit(NULL));
  uint32_t count = 0;
  CHECK(aclrtGetDeviceCount(&count));
  CHECK(aclrtSetDevice(1));
  int32_t device = -1;
  CHECK(aclrtGetDevice(&device));
  aclrtContext context = NULL;
  CHECK(aclrtCreateContext(&context, 1));
  aclrtStream stream = NULL;
  CHECK(aclrtCreateStream(&stream));

  enum { N = 1024 };
  float host_a[N], host_b[N], host_out[N];
  for (int i = 0; i < N; ++i) {
    host_a[i] = (float)i;
    host_b[i] = 0.5f * (float)i;
  }
  const size_t bytes = sizeof(host_a);
  void *a = NULL, *b = NULL, *out = NULL;
  CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&out, bytes, ACL_MEM_MALLOC_NORMAL_ONLY));
  CHECK(aclrtMemcpy(a, bytes, host_a, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpyAsync(b, bytes, host_b, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));

  int64_t shape[1] = {N}, strides[1] = {1};
  aclTensor* ta = aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, a);
  aclTensor* tb = aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, b);
  aclTensor* tout = aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, out);
  float two = 2.0f;
  aclScalar* alpha = aclCreateScalar(&two, ACL_FLOAT);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = NULL;
  if (aclnnAddGetWorkspaceSize(ta, tb, alpha, tout, &workspace_size, &executor) != 0) {
    fprintf(stderr, "aclnnAddGetWorkspaceSize failed: %s\n", aclnnGetRecentErrMsg());
    return 1;
  }
  void* workspace = NULL;
  if (workspace_size > 0) CHECK(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST));
  aclrtEvent start = NULL, end = NULL;
  CHECK(aclrtCreateEvent(&start));
  CHECK(aclrtCreateEventWithFlag(&end, ACL_EVENT_TIME_LINE));
  CHECK(aclrtRecordEvent(start, stream));
  if (aclnnAdd(workspace, workspace_size, executor, stream) != 0) {
    fprintf(stderr, "aclnnAdd failed: %s\n", aclnnGetRecentErrMsg());
    return 1;
  }
  int flag = 0;
  CHECK(aclrtLaunchHostFunc(stream, on_stream, &flag));
  CHECK(aclrtRecordEvent(end, stream));
  CHECK(aclrtSynchronizeStream(stream));
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  CHECK(aclrtQueryEventStatus(end, &status));
  float ms = -1.0f;
  CHECK(aclrtEventElapsedTime(&ms, start, end));
  CHECK(aclrtMemcpy(host_out, bytes, out, bytes, ACL_MEMCPY_DEVICE_TO_HOST));

  double sum = 0.0, expected = 0.0;
  for (int i = 0; i < N; ++i) {
    sum += host_out[i];
    expected += host_a[i] + 2.0 * host_b[i];
  }
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total_bytes));

  /* Errors: a copy larger than its destination is refused with ACL's code and a message. */
  aclError too_big = aclrtMemcpy(host_out, bytes / 2, out, bytes, ACL_MEMCPY_DEVICE_TO_HOST);

  printf("devices=%u device=%d soc=%s\n", count, device, aclrtGetSocName());
  printf("sum=%.1f expected=%.1f flag=%d status=%d elapsed_ok=%d mem_ok=%d\n", sum, expected, flag, (int)status,
         ms >= 0.0f, total_bytes > 0 && free_bytes <= total_bytes);
  printf("too_big=%d msg=%s\n", too_big, aclGetRecentErrMsg());

  aclDestroyTensor(ta);
  aclDestroyTensor(tb);
  aclDestroyTensor(tout);
  aclDestroyScalar(alpha);
  CHECK(aclrtDestroyEvent(start));
  CHECK(aclrtDestroyEvent(end));
  if (workspace) CHECK(aclrtFree(workspace));
  CHECK(aclrtFree(a));
  CHECK(aclrtFree(b));
  CHECK(aclrtFree(out));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtDestroyContext(context));
  CHECK(aclrtResetDevice(1));
  CHECK(aclFinalize());
  aclError again = aclFinalize();
  printf("finalize_again=%d\n", again);
  return 0;
}

/* kernel_binary.c - a software-NPU "kernel binary": a shared library whose kernel runs once per
   block; each block scales its slice of a float buffer. */
#include <stdint.h>

#include "npu/kernel_launch.h"
#include "scale_args.h"

int scale_kernel(void* raw) {
  const struct ScaleArgs* args = (const struct ScaleArgs*)raw;
  const int64_t blocks = nrtGetBlockNum(), block = nrtGetBlockIdx();
  const int64_t per = (args->n + blocks - 1) / blocks;
  for (int64_t i = block * per; i < args->n && i < (block + 1) * per; ++i) args->data[i] *= args->factor;
  return 0;
}

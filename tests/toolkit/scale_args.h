/* scale_args.h - the arguments of kernel_binary.c's scale_kernel, as kernel_program.c passes them. */
#ifndef TESTS_TOOLKIT_SCALE_ARGS_H_
#define TESTS_TOOLKIT_SCALE_ARGS_H_

#include <stdint.h>

struct ScaleArgs {
  float* data;
  int64_t n;
  float factor;
};

#endif

// add_custom.h - the add_custom kernels' declarations, for the host code that launches them.
#pragma once

#include <npu/kernel_launch.h>

// z[i] = x[i] + y[i] for i in [0, totalLength); T is float, _Float16 or int32_t.
template <typename T>
__global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength);

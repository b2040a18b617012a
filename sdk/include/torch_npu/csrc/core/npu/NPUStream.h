// torch_npu/csrc/core/npu/NPUStream.h - c10_npu::NPUStream, getCurrentNPUStream() and friends.
#pragma once

#include "torch_npu/csrc/core/NPUStream.h"

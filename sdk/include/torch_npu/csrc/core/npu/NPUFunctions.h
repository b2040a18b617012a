// torch_npu/csrc/core/npu/NPUFunctions.h - device count and current device (c10_npu::GetDevice).
#pragma once

#include "torch_npu/csrc/core/NPUFunctions.h"

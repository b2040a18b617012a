// torch_npu/csrc/framework/utils/OpAdapter.h - what an extension's op adapter includes:
// EXEC_NPU_CMD(aclnnXxx, args...), OpCommand (builder form and RunOpApi), the current npu stream.
#pragma once

#include "torch_npu/csrc/core/NPUFunctions.h"
#include "torch_npu/csrc/core/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"

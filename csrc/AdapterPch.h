// AdapterPch.h - precompiled header for the adapter: the c10/ATen headers nearly every file needs.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

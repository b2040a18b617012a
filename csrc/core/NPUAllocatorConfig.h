// NPUAllocatorConfig.h - the caching allocator's settings from PYTORCH_NPU_ALLOC_CONF (or
// PYTORCH_ALLOC_CONF), parsed and validated by PyTorch's allocator-config parser as torch_npu does.
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace c10_npu::NPUCachingAllocator {

struct AllocatorSettings {
  size_t max_split_size = static_cast<size_t>(-1);  // blocks from this size on are never split
  size_t max_non_split_rounding_size = 20971520;    // an oversize block may exceed a request by this
  double garbage_collection_threshold = 0;          // 0: off
  bool expandable_segments = false;
  size_t large_segment_size = 20971520;  // segment of mid-size (1 - 10 MiB) requests
  // Per size class from 1 MiB (index 0) to 64 GiB (index 15): 0 / 1 off, else the number of
  // rounding steps between two powers of two.
  std::array<size_t, 16> roundup_power2_divisions{};
  // Share of device memory this process may reserve (1: all); torch_npu's per_process_memory_fraction.
  double per_process_memory_fraction = 1.0;
  // Requests that would pass that share fail at once with OutOfMemoryError (and count as
  // num_oom_rejections) instead of reaching the device: serving processes stay alive.
  bool throw_on_npumalloc_oom = false;
  std::string text;  // the setting string as given, for snapshots
};

// The current settings: read from the environment at first use, replaced by setAllocatorSettings.
const AllocatorSettings& allocatorSettings();
// Parses `settings` (the PYTORCH_NPU_ALLOC_CONF syntax) and makes it current. Throws ValueError-type
// c10 errors for unknown keys and invalid values; torch_npu's device-specific keys that mean
// nothing on the software NPU are accepted with a warning.
void setAllocatorSettings(const std::string& settings);
// Divisions for a request of `size` bytes under `settings`.
size_t roundupPower2Divisions(const AllocatorSettings& settings, size_t size);

}  // namespace c10_npu::NPUCachingAllocator

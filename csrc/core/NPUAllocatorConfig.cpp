// NPUAllocatorConfig.cpp - PYTORCH_NPU_ALLOC_CONF: PyTorch's parser for the common keys, torch_npu's
// rules for the rest (unknown keys are errors; its hardware-only keys are accepted with a warning).
#include "csrc/core/NPUAllocatorConfig.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/util/Exception.h>
#include <c10/util/env.h>

#include <atomic>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_set>

namespace c10_npu::NPUCachingAllocator {
namespace {

using c10::CachingAllocator::AcceleratorAllocatorConfig;

// Keys of PyTorch's accelerator config that this allocator implements.
const std::unordered_set<std::string> kSupportedCommonKeys = {
    "max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold",
    "expandable_segments", "roundup_power2_divisions", "large_segment_size_mb"};

// torch_npu's own keys: they tune the Ascend driver (address alignment, huge pages, host
// registration), which has no counterpart on the software NPU, so scripts setting them still run.
const std::unordered_set<std::string> kNpuDriverKeys = {
    "base_addr_aligned_kb", "page_size", "segment_size_mb", "multi_stream_lazy_reclaim",
    "pin_memory_expandable_segments", "pinned_mem_register", "release_lock_on_npumalloc",
    "pinned_reserve_segment_size_mb"};

// torch_npu's own keys that this allocator implements.
const std::unordered_set<std::string> kNpuKeys = {"per_process_memory_fraction", "throw_on_npumalloc_oom"};

constexpr size_t kMB = 1048576;

struct NpuValues {
  std::optional<double> fraction;
  std::optional<bool> throw_on_oom;
};

void parseNpuKey(const std::string& key, const std::string& value, NpuValues& values) {
  if (key == "throw_on_npumalloc_oom") {
    TORCH_CHECK(value == "True" || value == "False", "PYTORCH_NPU_ALLOC_CONF: ",
                      "throw_on_npumalloc_oom takes True or False, got '", value, "'");
    values.throw_on_oom = value == "True";
    return;
  }
  double fraction = -1;
  try {
    size_t used = 0;
    fraction = std::stod(value, &used);
    if (used != value.size()) fraction = -1;
  } catch (const std::exception&) {
  }
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "PYTORCH_NPU_ALLOC_CONF: ",
                    "per_process_memory_fraction is invalid, set it in [0.0, 1.0] (got '", value, "')");
  values.fraction = fraction;
}

AllocatorSettings parse(const std::string& text) {
  c10::CachingAllocator::ConfigTokenizer tokens(text);
  std::unordered_set<std::string> given;
  NpuValues own_values;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& key = tokens[i];
    given.insert(key);
    const bool common = AcceleratorAllocatorConfig::getKeys().count(key) != 0;
    const bool own = kNpuKeys.count(key) != 0;
    TORCH_CHECK_VALUE(common || own || kNpuDriverKeys.count(key) != 0, "Unrecognized key '", key,
                      "' in PYTORCH_NPU_ALLOC_CONF (\"", text, "\"); the npu caching allocator "
                      "takes max_split_size_mb, garbage_collection_threshold, expandable_segments, "
                      "roundup_power2_divisions, max_non_split_rounding_mb, large_segment_size_mb, "
                      "per_process_memory_fraction and throw_on_npumalloc_oom");
    if (own) {
      TORCH_CHECK_VALUE(i + 2 < tokens.size() && tokens[i + 1] == ":", "PYTORCH_NPU_ALLOC_CONF: ",
                        "expected ':' and a value after '", key, "' in \"", text, "\"");
      parseNpuKey(key, tokens[i + 2], own_values);
    } else if (!common) {
      TORCH_WARN("PYTORCH_NPU_ALLOC_CONF: '", key, "' configures the Ascend driver and has no ",
                      "effect on the software NPU");
    } else if (kSupportedCommonKeys.count(key) == 0) {
      TORCH_WARN("PYTORCH_NPU_ALLOC_CONF: '", key, "' is a setting of PyTorch's pinned host ",
                      "allocator and has no effect on the npu caching allocator");
    }
    TORCH_CHECK_VALUE(i + 1 < tokens.size() && tokens[i + 1] == ":", "PYTORCH_NPU_ALLOC_CONF: ",
                      "expected ':' and a value after '", key, "' in \"", text, "\"");
    i = tokens.skipKey(i);
    if (i + 1 < tokens.size()) {
      TORCH_CHECK_VALUE(tokens[i + 1] == ",", "PYTORCH_NPU_ALLOC_CONF: expected ',' after the ",
                        "value of '", key, "' in \"", text, "\", got '", tokens[i + 1], "'");
      ++i;
    }
  }
  AllocatorSettings s;
  s.text = text;
  if (tokens.size() == 0) return s;  // the defaults (PyTorch's parser keeps its old state for "")
  s.per_process_memory_fraction = own_values.fraction.value_or(1.0);
  s.throw_on_npumalloc_oom = own_values.throw_on_oom.value_or(false);
  // PyTorch's parser validates the common keys (ranges, power-of-two divisions, True/False). It
  // keeps values from earlier settings, so only the keys this text gives are read back; the
  // others keep their defaults.
  AcceleratorAllocatorConfig::instance().parseArgs(text);
  auto has = [&](const char* key) { return given.count(key) != 0; };
  if (has("max_split_size_mb")) s.max_split_size = AcceleratorAllocatorConfig::max_split_size();
  if (has("max_non_split_rounding_mb")) {
    s.max_non_split_rounding_size = AcceleratorAllocatorConfig::max_non_split_rounding_size();
  }
  if (has("garbage_collection_threshold")) {
    s.garbage_collection_threshold = AcceleratorAllocatorConfig::garbage_collection_threshold();
  }
  if (has("expandable_segments")) s.expandable_segments = AcceleratorAllocatorConfig::use_expandable_segments();
  if (has("large_segment_size_mb")) s.large_segment_size = AcceleratorAllocatorConfig::large_segment_size();
  if (has("roundup_power2_divisions")) {
    for (size_t i = 0; i < s.roundup_power2_divisions.size(); ++i) {
      s.roundup_power2_divisions[i] = AcceleratorAllocatorConfig::roundup_power2_divisions(kMB << i);
    }
  }
  // As torch_npu: expandable segments never split-limit or collect (they grow in place instead).
  TORCH_CHECK_VALUE(!s.expandable_segments ||
                        (s.max_split_size == std::numeric_limits<size_t>::max() &&
                         s.garbage_collection_threshold == 0),
                    "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with ",
                    "`expandable_segments`, please set `expandable_segments` to `False`.");
  return s;
}

std::mutex& settingsMutex() {
  static std::mutex mutex;
  return mutex;
}

// Published settings are immutable and never freed: readers hold plain references to them.
std::atomic<const AllocatorSettings*>& current() {
  static std::atomic<const AllocatorSettings*> settings{nullptr};
  return settings;
}

}  // namespace

const AllocatorSettings& allocatorSettings() {
  const AllocatorSettings* s = current().load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  std::lock_guard<std::mutex> lock(settingsMutex());
  s = current().load(std::memory_order_acquire);
  if (s == nullptr) {
    std::optional<std::string> env = c10::utils::get_env("PYTORCH_NPU_ALLOC_CONF");
    if (!env) env = c10::utils::get_env("PYTORCH_ALLOC_CONF");
    s = new AllocatorSettings(parse(env.value_or("")));
    current().store(s, std::memory_order_release);
  }
  return *s;
}

void setAllocatorSettings(const std::string& settings) {
  auto* parsed = new AllocatorSettings(parse(settings));
  std::lock_guard<std::mutex> lock(settingsMutex());
  current().store(parsed, std::memory_order_release);
}

size_t roundupPower2Divisions(const AllocatorSettings& settings, size_t size) {
  // Size classes from 1 MiB (index 0) to 64 GiB (15), as PyTorch's intervals.
  size_t index = 0;
  for (size_t s = size >> 20; s > 1 && index + 1 < settings.roundup_power2_divisions.size(); s >>= 1) {
    ++index;
  }
  return settings.roundup_power2_divisions[index];
}

}  // namespace c10_npu::NPUCachingAllocator

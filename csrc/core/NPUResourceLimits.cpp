// NPUResourceLimits.cpp - device and stream core limits, and the share of host threads they leave a
// stream worker's kernels.
#include "csrc/core/NPUResourceLimits.h"

#include <c10/util/Exception.h>
#include <npu/runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"

namespace c10_npu {
namespace {

constexpr int kMaxDevices = 64;
constexpr int kKinds = 2;

// Device limits: 0 = none set; whether any device has a vector limit.
std::array<std::array<std::atomic<int64_t>, kKinds>, kMaxDevices> g_device_limits{};
std::atomic<bool> g_any_device_limit{false};

// Stream limits as set (for get_stream_limit), by (device, stream id); 0 = none set.
using StreamKey = std::tuple<int, int64_t>;
std::mutex g_streams_mu;
std::map<StreamKey, std::array<int64_t, kKinds>> g_stream_limits;

// The vector-core limit of the stream this worker runs (0: none), set in stream order by a host
// function that set_stream_limit / reset_stream_limit queue on the stream.
thread_local int64_t t_worker_vector_limit = 0;

const char* kindName(CoreKind kind) { return kind == CoreKind::kCube ? "cube_num" : "vector_num"; }

int deviceSlot(c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(device >= 0 && device < kMaxDevices, "npu core limits: invalid device index ", device);
  return device;
}

void checkValue(c10::DeviceIndex device, CoreKind kind, int64_t value, const char* what) {
  const int64_t count = coreCount(device, kind);
  TORCH_CHECK_VALUE(value >= 1 && value <= count, what, ": ", kindName(kind), " must be in [1, ", count,
                    "] (npu:", static_cast<int>(device), " has ", count,
                    kind == CoreKind::kCube ? " cube" : " vector", " cores) or -1 to leave it unchanged, got ",
                    value);
}

// Queues the stream's new vector limit for its worker thread.
void sendToWorker(const c10::Stream& stream, int64_t vector_limit) {
  auto* value = new int64_t(vector_limit);
  NPU_CHECK(nrtLaunchHostFunc(NPUStream(stream).handle(), [](void* data) {
    t_worker_vector_limit = *static_cast<int64_t*>(data);
    delete static_cast<int64_t*>(data);
    return 0;
  }, value));
}

}  // namespace

int64_t coreCount(c10::DeviceIndex device, CoreKind kind) {
  nrtDeviceProp prop;
  NPU_CHECK(nrtGetDeviceProperties(device, &prop));
  return kind == CoreKind::kCube ? prop.cube_core_num : prop.vector_core_num;
}

void setDeviceCoreLimit(c10::DeviceIndex device, CoreKind kind, int64_t value) {
  checkValue(device, kind, value, "set_device_limit");
  g_device_limits[deviceSlot(device)][static_cast<int>(kind)].store(value, std::memory_order_relaxed);
  if (kind == CoreKind::kVector) g_any_device_limit.store(true, std::memory_order_relaxed);
}

int64_t deviceCoreLimit(c10::DeviceIndex device, CoreKind kind) {
  const int64_t value = g_device_limits[deviceSlot(device)][static_cast<int>(kind)].load(std::memory_order_relaxed);
  return value > 0 ? value : coreCount(device, kind);
}

void setStreamCoreLimit(const c10::Stream& stream, CoreKind kind, int64_t value) {
  checkValue(stream.device_index(), kind, value, "set_stream_limit");
  int64_t vector_limit = 0;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    auto& limits = g_stream_limits[{stream.device_index(), stream.id()}];
    limits[static_cast<int>(kind)] = value;
    vector_limit = limits[static_cast<int>(CoreKind::kVector)];
  }
  if (kind == CoreKind::kVector) sendToWorker(stream, vector_limit);
}

void resetStreamCoreLimits(const c10::Stream& stream) {
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    g_stream_limits.erase({stream.device_index(), stream.id()});
  }
  sendToWorker(stream, 0);
}

int64_t streamCoreLimit(const c10::Stream& stream, CoreKind kind) {
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    auto it = g_stream_limits.find({stream.device_index(), stream.id()});
    if (it != g_stream_limits.end() && it->second[static_cast<int>(kind)] > 0) {
      return it->second[static_cast<int>(kind)];
    }
  }
  return deviceCoreLimit(stream.device_index(), kind);
}

int workerThreadCap(int threads) {
  const int64_t stream_limit = t_worker_vector_limit;
  // The common case, one thread-local and one relaxed load per task: no limit anywhere.
  if (stream_limit <= 0 && !g_any_device_limit.load(std::memory_order_relaxed)) return threads;
  int32_t device = -1;
  nrtDeviceProp prop;
  if (nrtGetDevice(&device) != NRT_SUCCESS || device < 0 || device >= kMaxDevices ||
      nrtGetDeviceProperties(device, &prop) != NRT_SUCCESS || prop.vector_core_num <= 0) {
    return threads;
  }
  const int64_t limit = stream_limit > 0
                            ? stream_limit
                            : g_device_limits[device][static_cast<int>(CoreKind::kVector)].load(std::memory_order_relaxed);
  if (limit <= 0) return threads;
  const int64_t share = (threads * limit + prop.vector_core_num - 1) / prop.vector_core_num;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, share)));
}

}  // namespace c10_npu

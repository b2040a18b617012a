// StreamRegistry.h - the live streams of a runtime, including each device's lazily created default.
#ifndef NPU_RUNTIME_SRC_STREAM_REGISTRY_H_
#define NPU_RUNTIME_SRC_STREAM_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "HandleTable.h"
#include "Stream.h"
#include "npu/runtime.h"

namespace npu::runtime {

class StreamRegistry {
 public:
  StreamRegistry(int device_count, uint64_t generation, StreamOptions options = {});
  ~StreamRegistry();  // ShutdownAll()
  StreamRegistry(const StreamRegistry&) = delete;
  StreamRegistry& operator=(const StreamRegistry&) = delete;

  std::shared_ptr<Stream> Create(int device);
  // NULL is current_device's default stream, created on first use; anything else must be live.
  nrtError_t Resolve(nrtStream_t handle, int current_device, std::shared_ptr<Stream>* stream);
  // The same through a per-thread cache (launches resolve the same stream over and over): the
  // stream stays alive while the calling thread's cache holds it, at least for the current call.
  nrtError_t ResolveCached(nrtStream_t handle, int current_device, Stream** stream);
  // The streams of a device, also cached per thread until a stream is created or destroyed.
  const std::vector<std::shared_ptr<Stream>>& OnDeviceCached(int device);
  // Unregisters a user-created stream; the caller then shuts it down.
  nrtError_t Remove(nrtStream_t handle, std::shared_ptr<Stream>* stream);
  std::vector<std::shared_ptr<Stream>> OnDevice(int device) const;
  // Drains and joins every stream; used by nrtFinalize().
  void ShutdownAll();

 private:
  std::shared_ptr<Stream> Add(int device, bool is_default);

  const uint64_t generation_;
  const StreamOptions options_;
  // Bumped whenever a stream is created or destroyed: invalidates the per-thread caches.
  std::atomic<uint64_t> epoch_{0};
  HandleTable<Stream> streams_;  // every live stream, defaults included
  // Shared for lookups: NULL, the stream most launches use, resolves here.
  std::shared_mutex defaults_mu_;
  std::vector<std::shared_ptr<Stream>> defaults_;  // per device; null until first used
};

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_STREAM_REGISTRY_H_

// NPUStream.cpp - stream registry (default + pool per device), thread-local current streams, host tasks.
#include "csrc/core/NPUStream.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "csrc/core/NPUBlockingWait.h"
#include "csrc/core/NPUThreadTeams.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUTrace.h"

namespace c10_npu {
namespace {

struct DeviceStreams {
  std::once_flag once[kSyncLaunchStreamId + 1];
  // Set once, then read on every launch without the once_flag (whose check is not free).
  std::atomic<nrtStream_t> handles[kSyncLaunchStreamId + 1] = {};
  std::atomic<uint32_t> next_pool{0};
};

using Registry = std::vector<std::unique_ptr<DeviceStreams>>;

Registry* newRegistry() {
  auto* v = new Registry();
  for (int i = 0; i < device_count(); ++i) v->push_back(std::make_unique<DeviceStreams>());
  return v;
}

// Leaked; replaced (the old one leaked too) in a forked child, whose runtime has no streams yet.
std::atomic<Registry*> g_registry{nullptr};

Registry& registry() {
  static const bool created = [] {
    g_registry.store(newRegistry());
    return true;
  }();
  (void)created;
  return *g_registry.load(std::memory_order_acquire);
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) return current_device();
  check_device_index(device);
  return device;
}

// Current stream id per device for this thread; empty until first set.
thread_local std::vector<c10::StreamId> tls_current;

}  // namespace

void forgetStreamsAfterFork() noexcept {
  if (g_registry.load() != nullptr) g_registry.store(newRegistry());
}

NPUStream::NPUStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "expected an npu stream, got a stream on ", stream.device());
  TORCH_CHECK(isValidStreamId(stream.id()), "invalid npu stream id ", stream.id(), " (npu stream ids are 0..",
              kStreamPoolSize, ", ", kCommStreamId, " and ", kSyncLaunchStreamId, ")");
}

nrtStream_t NPUStream::handle() const {
  auto& dev = *registry().at(stream_.device_index());
  auto id = static_cast<size_t>(stream_.id());
  if (nrtStream_t handle = dev.handles[id].load(std::memory_order_acquire); C10_LIKELY(handle)) {
    return handle;
  }
  std::call_once(dev.once[id], [&] {
    int32_t prev = 0;
    NPU_CHECK(nrtGetDevice(&prev));
    NPU_CHECK(nrtSetDevice(stream_.device_index()));
    nrtStream_t handle = nullptr;
    nrtError_t err = nrtStreamCreate(&handle);
    nrtSetDevice(prev);
    NPU_CHECK(err);
    dev.handles[id].store(handle, std::memory_order_release);
  });
  return dev.handles[id].load(std::memory_order_acquire);
}

bool NPUStream::query() const {
  nrtError_t err = nrtStreamQuery(handle());
  if (err == NRT_ERROR_NOT_READY) return false;
  NPU_CHECK(err);
  return true;
}

void NPUStream::synchronize() const {
  noteBlockingWait();
  nrtError_t err;
  if (nrtStreamQuery(handle()) == NRT_ERROR_NOT_READY) {
    BlockingWaitScope wait;
    err = nrtStreamSynchronize(handle());
  } else {
    err = nrtStreamSynchronize(handle());  // idle: returns at once (with a pending task error, if any)
  }
  NPU_CHECK(err);
  trace::streamSynchronized(stream_);
}

NPUStream getDefaultNPUStream(c10::DeviceIndex device) {
  device = resolve(device);
  return NPUStream(c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, device)));
}

NPUStream getStreamFromPool(c10::DeviceIndex device) {
  device = resolve(device);
  uint32_t n = registry()[device]->next_pool.fetch_add(1) % kStreamPoolSize;
  return NPUStream(c10::Stream(c10::Stream::UNSAFE,
                               c10::Device(c10::DeviceType::PrivateUse1, device), n + 1));
}

NPUStream getCommunicationNPUStream(c10::DeviceIndex device) {
  device = resolve(device);
  return NPUStream(c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                               kCommStreamId));
}

NPUStream getSyncLaunchNPUStream(c10::DeviceIndex device) {
  device = resolve(device);
  return NPUStream(c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                               kSyncLaunchStreamId));
}

bool currentStreamIsSyncLaunch(c10::DeviceIndex device) {
  return static_cast<size_t>(device) < tls_current.size() && tls_current[device] == kSyncLaunchStreamId;
}

NPUStream getCurrentNPUStream(c10::DeviceIndex device) {
  device = resolve(device);
  c10::StreamId id = static_cast<size_t>(device) < tls_current.size() ? tls_current[device] : 0;
  return NPUStream(
      c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id));
}

nrtStream_t currentStreamHandle(c10::DeviceIndex device) {
  const c10::StreamId id =
      static_cast<size_t>(device) < tls_current.size() ? tls_current[device] : 0;
  const Registry& streams = registry();
  if (C10_LIKELY(static_cast<size_t>(device) < streams.size())) {
    nrtStream_t handle = streams[device]->handles[id].load(std::memory_order_acquire);
    if (C10_LIKELY(handle != nullptr)) return handle;
  }
  return getCurrentNPUStream(device).handle();  // creates the stream, or names a bad index
}

void setCurrentNPUStream(NPUStream stream) {
  if (tls_current.size() < static_cast<size_t>(device_count())) tls_current.resize(device_count(), 0);
  tls_current.at(stream.device_index()) = stream.id();
}

}  // namespace c10_npu

// StreamRegistry.cpp - stream handles and default streams, and the stream and device-sync C API.
#include "StreamRegistry.h"

#include "Capture.h"
#include "npu/graph.h"

#include <utility>

#include "Activity.h"
#include "Error.h"
#include "FaultInjection.h"
#include "Runtime.h"

namespace npu::runtime {

StreamRegistry::StreamRegistry(int device_count, uint64_t generation, StreamOptions options)
    : generation_(generation), options_(options), defaults_(static_cast<size_t>(device_count)) {}

StreamRegistry::~StreamRegistry() { ShutdownAll(); }

std::shared_ptr<Stream> StreamRegistry::Add(int device, bool is_default) {
  const uint64_t id = NextHandleId();
  auto stream = std::make_shared<Stream>(id, device, is_default, generation_, options_);
  streams_.Insert(id, stream);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  return stream;
}

namespace {
struct CachedStream {
  uint64_t generation = 0;
  uint64_t epoch = 0;
  nrtStream_t handle = nullptr;
  int device = -1;
  Stream* stream = nullptr;
};
struct CachedDeviceStreams {
  uint64_t generation = 0;
  uint64_t epoch = 0;
  int device = -1;
  std::vector<std::shared_ptr<Stream>> streams;
};
// Per thread: the last streams resolved (with references keeping them alive) and the last device's
// stream list. Reached through one trivially destructible pointer, so that the launch path pays a
// single TLS lookup and no guard checks.
struct ThreadCache {
  CachedStream streams[4];
  std::shared_ptr<Stream> keep[4];
  CachedDeviceStreams device;
};
thread_local ThreadCache* t_cache = nullptr;

ThreadCache& Cache() {
  if (t_cache == nullptr) {
    struct Owner {
      ThreadCache cache;
      ~Owner() { t_cache = nullptr; }
    };
    thread_local Owner owner;
    t_cache = &owner.cache;
  }
  return *t_cache;
}
}  // namespace

nrtError_t StreamRegistry::ResolveCached(nrtStream_t handle, int current_device, Stream** stream) {
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  ThreadCache& cache = Cache();
  const size_t slot = (HandleId(handle) ^ static_cast<uint64_t>(current_device)) & 3;
  CachedStream& c = cache.streams[slot];
  if (c.generation == generation_ && c.epoch == epoch && c.handle == handle &&
      (handle != nullptr || c.device == current_device)) {
    *stream = c.stream;
    return NRT_SUCCESS;
  }
  std::shared_ptr<Stream> found;
  if (nrtError_t error = Resolve(handle, current_device, &found)) return error;
  *stream = found.get();
  // Creating the default stream bumped the epoch: record the value that includes it.
  c = CachedStream{generation_, epoch_.load(std::memory_order_acquire), handle, current_device,
                   found.get()};
  cache.keep[slot] = std::move(found);
  return NRT_SUCCESS;
}

const std::vector<std::shared_ptr<Stream>>& StreamRegistry::OnDeviceCached(int device) {
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  CachedDeviceStreams& c = Cache().device;
  if (c.generation != generation_ || c.epoch != epoch || c.device != device) {
    c = CachedDeviceStreams{generation_, epoch, device, OnDevice(device)};
  }
  return c.streams;
}

std::shared_ptr<Stream> StreamRegistry::Create(int device) { return Add(device, false); }

nrtError_t StreamRegistry::Resolve(nrtStream_t handle, int current_device,
                                   std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) {
    {
      std::shared_lock<std::shared_mutex> lock(defaults_mu_);
      *stream = defaults_[current_device];
    }
    if (*stream) return NRT_SUCCESS;
    std::lock_guard<std::shared_mutex> lock(defaults_mu_);
    std::shared_ptr<Stream>& default_stream = defaults_[current_device];
    if (!default_stream) default_stream = Add(current_device, true);
    *stream = default_stream;
    return NRT_SUCCESS;
  }
  *stream = streams_.Find(HandleId(handle));
  if (*stream) return NRT_SUCCESS;
  return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, "stream #", HandleId(handle),
                     " is not a live stream: it was destroyed, or not created by nrtStreamCreate "
                     "since the last nrtFinalize");
}

nrtError_t StreamRegistry::Remove(nrtStream_t handle, std::shared_ptr<Stream>* stream) {
  if (handle == nullptr) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE,
                       "the default stream (NULL) belongs to its device and cannot be destroyed");
  }
  std::shared_ptr<Stream> found;
  if (nrtError_t error = Resolve(handle, 0, &found)) return error;
  if (found->OnWorkerThread()) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "cannot destroy ", found->name(),
                       " from one of its own host functions: destroying waits for its work");
  }
  *stream = streams_.Remove(found->id());
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  if (*stream) return NRT_SUCCESS;
  // Another thread destroyed it between the lookup and here.
  return NPU_RT_FAIL(NRT_ERROR_INVALID_HANDLE, found->name(), " was destroyed concurrently");
}

std::vector<std::shared_ptr<Stream>> StreamRegistry::OnDevice(int device) const {
  return streams_.Select([device](const Stream& stream) { return stream.device() == device; });
}

void StreamRegistry::ShutdownAll() {
  {
    std::lock_guard<std::shared_mutex> lock(defaults_mu_);
    for (auto& stream : defaults_) stream.reset();
  }
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  for (const auto& stream : streams_.TakeAll()) stream->Shutdown();
}

}  // namespace npu::runtime

using npu::runtime::Runtime;
using npu::runtime::Stream;
using StreamPtr = std::shared_ptr<npu::runtime::Stream>;

namespace npu::runtime {
namespace {

// The checks every host-function launch makes before `launch` queues (or runs) it on the stream.
template <typename Launch>
nrtError_t LaunchHostFunc(const char* api, nrtStream_t stream, nrtHostFunc fn, Launch launch) {
  return WithRuntime([&](Runtime& rt) {
    // Taken first, so that a refused launch does not leave its label to the next one.
    if (activity::Active()) activity::TakeHostFuncLabel();
    if (fn == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, api, ": fn is NULL");
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    return launch(*found);
  });
}

// A host function launched on a capturing stream: recorded instead of queued (see RecordLaunch).
std::optional<nrtError_t> CaptureHostFunc(Stream& stream, nrtHostFunc fn, void* user_data,
                                          nrtHostFuncRelease release, const char* name, const char* site) {
  GraphNode node;
  node.run = [fn, user_data] { return fn(user_data); };
  if (release != nullptr) node.release = [release, user_data] { release(user_data); };
  node.name = name;
  node.site = site;
  return RecordLaunch(stream, std::move(node));
}

}  // namespace
}  // namespace npu::runtime

extern "C" {

nrtError_t nrtStreamCreate(nrtStream_t* stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (stream == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamCreate: stream is NULL");
    }
    *stream = npu::runtime::ToHandle<nrtStream_t>(rt.streams().Create(rt.current_device())->id());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamDestroy(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    StreamPtr found;
    if (nrtError_t error = rt.streams().Remove(stream, &found)) return error;
    found->Shutdown();
    NPU_RT_LOG(kInfo, "destroyed ", found->name());
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamSynchronize(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    if (nrtError_t error = npu::runtime::CheckSyncAllowed("nrtStreamSynchronize", found)) return error;
    if (nrtError_t error = found->Synchronize()) return error;
    if (nrtError_t error = npu::runtime::ReportTaskErrors(*found)) return error;
    return found->CheckNotLost();
  });
}

nrtError_t nrtStreamQuery(nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    if (found->capturing()) {
      // Refused without invalidating the capture: callers that only poll fall back to a sync, which
      // then names what they were doing.
      return NPU_RT_FAIL(NRT_ERROR_CAPTURE_UNSUPPORTED, "nrtStreamQuery: ", found->name(),
                         " is capturing; its captured work never completes until a replay");
    }
    return found->Idle() ? NRT_SUCCESS : NRT_ERROR_NOT_READY;
  });
}

nrtError_t nrtStreamGetDevice(nrtStream_t stream, int32_t* device) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (device == nullptr) {
      return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamGetDevice: device is NULL");
    }
    if (stream == nullptr) {
      *device = rt.current_device();  // no need to create the default stream to answer
      return NRT_SUCCESS;
    }
    Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    *device = found->device();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtStreamGetTaskCount(nrtStream_t stream, uint64_t* count) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (count == nullptr) return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, "nrtStreamGetTaskCount: count is NULL");
    StreamPtr found;
    if (nrtError_t error = rt.streams().Resolve(stream, rt.current_device(), &found)) return error;
    *count = found->enqueued();
    return NRT_SUCCESS;
  });
}

nrtError_t nrtLaunchHostFunc(nrtStream_t stream, nrtHostFunc fn, void* user_data) {
  return npu::runtime::LaunchHostFunc("nrtLaunchHostFunc", stream, fn, [&](Stream& found) {
    if (found.capturing()) {
      if (auto recorded = npu::runtime::CaptureHostFunc(found, fn, user_data, nullptr, nullptr, nullptr)) {
        return *recorded;
      }
    }
    return found.Enqueue([fn, user_data] { return fn(user_data); });
  });
}

nrtError_t nrtLaunchHostFuncNamed(nrtStream_t stream, nrtHostFunc fn, void* user_data, const char* name,
                                  const char* site) {
  return npu::runtime::LaunchHostFunc("nrtLaunchHostFuncNamed", stream, fn, [&](Stream& found) {
    if (found.capturing()) {
      if (auto recorded = npu::runtime::CaptureHostFunc(found, fn, user_data, nullptr, name, site)) return *recorded;
    }
    return found.Enqueue([fn, user_data] { return fn(user_data); }, false, name, site);
  });
}

nrtError_t nrtLaunchHostFuncShort(nrtStream_t stream, nrtHostFunc fn, void* user_data, const char* name,
                                  const char* site) {
  return npu::runtime::LaunchHostFunc("nrtLaunchHostFuncShort", stream, fn, [&](Stream& found) {
    if (found.capturing()) {
      if (auto recorded = npu::runtime::CaptureHostFunc(found, fn, user_data, nullptr, name, site)) return *recorded;
    }
    if (found.TryRunNow([fn, user_data] { return fn(user_data); }, name, site)) return NRT_SUCCESS;
    return found.Enqueue([fn, user_data] { return fn(user_data); }, false, name, site);
  });
}

nrtError_t nrtLaunchHostFuncOwned(nrtStream_t stream, nrtHostFunc fn, void* user_data, nrtHostFuncRelease release,
                                  const char* name, const char* site, int short_run) {
  bool taken = false;  // the stream or a capture owns user_data: it releases it
  const nrtError_t error = npu::runtime::LaunchHostFunc("nrtLaunchHostFuncOwned", stream, fn, [&](Stream& found) {
    if (found.capturing()) {
      if (auto recorded = npu::runtime::CaptureHostFunc(found, fn, user_data, release, name, site)) {
        taken = true;  // recorded, or released by the refusing capture
        return *recorded;
      }
    }
    auto run = [fn, user_data, release] {
      const int code = fn(user_data);
      if (release != nullptr) release(user_data);
      return code;
    };
    if (short_run != 0 && found.TryRunNow(run, name, site)) {
      taken = true;
      return NRT_SUCCESS;
    }
    const nrtError_t queued = found.Enqueue(run, false, name, site);
    taken = queued == NRT_SUCCESS;
    return queued;
  });
  if (!taken && release != nullptr) release(user_data);
  return error;
}

nrtError_t nrtDeviceSynchronize(void) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    // Only this thread replaces its cached list, so it stays valid (and its streams alive) here.
    const std::vector<StreamPtr>& streams = rt.streams().OnDeviceCached(rt.current_device());
    if (nrtError_t error = npu::runtime::CheckSyncAllowed("nrtDeviceSynchronize", nullptr)) return error;
    for (const StreamPtr& stream : streams) {
      if (nrtError_t error = stream->Synchronize()) return error;
    }
    if (nrtError_t error = npu::runtime::ReportTaskErrors(streams)) return error;
    if (rt.faults() != nullptr && rt.faults()->Lost(rt.current_device())) {
      return rt.faults()->FailLost(rt.current_device(), "nrtDeviceSynchronize");
    }
    return NRT_SUCCESS;
  });
}

}  // extern "C"

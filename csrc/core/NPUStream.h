// NPUStream.h - npu streams as c10::Stream: per-device default stream, a round-robin pool, current stream.
#pragma once

#include <c10/core/Stream.h>
#include <npu/runtime.h>

namespace c10_npu {

// Stream ids: 0 is the device's default stream, 1..kStreamPoolSize are pool streams,
// kCommStreamId is the device's communication stream, kSyncLaunchStreamId its sync-launch stream
// (torch.npu.SyncLaunchStream: every op launched on it has run when the launch returns). The two
// special streams carry the bit torch_npu marks its communication streams' ids with (32, the stream
// pool's size there): code reading hccl stream ids (ProcessGroupHCCL._get_stream_id) tests it.
constexpr int kStreamPoolSize = 8;
constexpr int kSpecialStreamBit = 32;
constexpr int kCommStreamId = kSpecialStreamBit | (kStreamPoolSize + 1);
constexpr int kSyncLaunchStreamId = kCommStreamId + 1;
// True for the ids above.
constexpr bool isValidStreamId(int64_t id) {
  return (id >= 0 && id <= kStreamPoolSize) || id == kCommStreamId || id == kSyncLaunchStreamId;
}

class NPUStream {
 public:
  explicit NPUStream(c10::Stream stream);

  c10::Stream unwrap() const { return stream_; }
  operator c10::Stream() const { return stream_; }  // as CUDAStream converts, for PyTorch's generic code
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::StreamId id() const { return stream_.id(); }
  nrtStream_t handle() const;  // the runtime stream (created on first use)
  // torch_npu's spelling of handle(), for extensions that launch kernels on it. Work queued there
  // is ordered with every op already launched on this stream, so need_empty has nothing to flush.
  nrtStream_t stream(bool need_empty = true) const {
    (void)need_empty;
    return handle();
  }

  bool isSyncLaunch() const { return stream_.id() == kSyncLaunchStreamId; }
  bool query() const;
  void synchronize() const;  // rethrows a failed task's error
  bool operator==(const NPUStream& other) const { return stream_ == other.stream_; }

 private:
  c10::Stream stream_;
};

NPUStream getDefaultNPUStream(c10::DeviceIndex device = -1);
NPUStream getStreamFromPool(c10::DeviceIndex device = -1);
NPUStream getCurrentNPUStream(c10::DeviceIndex device = -1);
// The current stream's runtime handle on `device` (a valid index, such as current_device()'s),
// without building an NPUStream: the allocator and the launch path ask for it on every op.
nrtStream_t currentStreamHandle(c10::DeviceIndex device);
// The stream collectives run on (ProcessGroupHCCL), outside the pool: a collective waiting for its
// peers never holds up user streams.
NPUStream getCommunicationNPUStream(c10::DeviceIndex device = -1);
void setCurrentNPUStream(NPUStream stream);
// The device's sync-launch stream, and whether it is the current stream of `device` (a valid index;
// one thread-local read, for the launch path).
NPUStream getSyncLaunchNPUStream(c10::DeviceIndex device = -1);
bool currentStreamIsSyncLaunch(c10::DeviceIndex device);

}  // namespace c10_npu

// Streams as keys (the pinned host allocator's per-block sets of streams).
template <>
struct std::hash<c10_npu::NPUStream> {
  size_t operator()(const c10_npu::NPUStream& s) const noexcept { return std::hash<c10::Stream>{}(s.unwrap()); }
};

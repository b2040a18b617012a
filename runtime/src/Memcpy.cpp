// Memcpy.cpp - checks that each copy's kind matches where its pointers live; the copy C API.
#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "Activity.h"
#include "Capture.h"
#include "DeviceMemory.h"
#include "Error.h"
#include "FaultInjection.h"
#include "Log.h"
#include "Runtime.h"
#include "Stream.h"
#include "StreamRegistry.h"

namespace npu::runtime {

std::atomic<nrtHostCopyFn> g_host_copy{nullptr};

// Large copies made by a host thread waiting for them (nrtMemcpy) that do not overlap go to the
// host's parallel copy when one is installed: a 16 MB memcpy on one core takes twice as long as on
// two. A stream worker's copies overlap with the host's work instead, and share the cores with it:
// one memmove, as are overlapping device-to-device copies within one allocation.
void CopyBytes(void* dst, const void* src, size_t count) {
  // Below 4 MiB one thread copies: the copy is over in well under a scheduler time slice, so a second thread
  // gains little when the cores are free and, when other processes hold them, waiting for it costs more.
  constexpr size_t kParallelCopyBytes = size_t{4} << 20;
  const auto* d = static_cast<const char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const bool overlap = d < s + count && s < d + count;
  if (count >= kParallelCopyBytes && !overlap && !OnAnyStreamWorker()) {
    if (nrtHostCopyFn copy = g_host_copy.load(std::memory_order_acquire)) {
      copy(dst, src, count);
      return;
    }
  }
  std::memmove(dst, src, count);
}
namespace {

struct Sides {
  bool dst_on_device;
  bool src_on_device;
};

std::optional<Sides> SidesOf(nrtMemcpyKind kind) {
  switch (kind) {
    case NRT_MEMCPY_HOST_TO_HOST:
      return Sides{false, false};
    case NRT_MEMCPY_HOST_TO_DEVICE:
      return Sides{true, false};
    case NRT_MEMCPY_DEVICE_TO_HOST:
      return Sides{false, true};
    case NRT_MEMCPY_DEVICE_TO_DEVICE:
      return Sides{true, true};
    case NRT_MEMCPY_KIND_RANGE_MIN_:
    case NRT_MEMCPY_KIND_RANGE_MAX_:
      break;
  }
  return std::nullopt;
}

const char* KindName(const Sides& sides) {
  static constexpr const char* kNames[2][2] = {
      {"NRT_MEMCPY_HOST_TO_HOST", "NRT_MEMCPY_DEVICE_TO_HOST"},
      {"NRT_MEMCPY_HOST_TO_DEVICE", "NRT_MEMCPY_DEVICE_TO_DEVICE"}};
  return kNames[sides.dst_on_device][sides.src_on_device];
}

// Only for kinds CheckCopy() has accepted.
const char* KindName(nrtMemcpyKind kind) { return KindName(*SidesOf(kind)); }

// [p, p + count) must lie inside one live device allocation.
nrtError_t CheckDeviceRange(const DeviceMemory& memory, const char* api, const char* role,
                            const void* p, size_t count, nrtError_t not_device_error,
                            const char* remedy) {
  const std::optional<Block> block = memory.Find(p);
  if (!block || block->device == kPinnedHost) {
    return NPU_RT_FAIL(not_device_error, api, ": ", role, " ", p, " is ",
                       block ? "pinned host memory" : "not inside a live device allocation", "; ",
                       remedy);
  }
  const size_t offset = static_cast<const char*>(p) - static_cast<const char*>(block->base);
  const size_t room = block->size - offset;
  if (count > room) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, api, ": ", role, " range of ", count, " bytes at ",
                       p, " overruns its npu:", block->device, " allocation (", block->size,
                       " bytes at ", block->base, ") by ", count - room, " bytes; only ", room,
                       " bytes are left after that address");
  }
  return NRT_SUCCESS;
}

nrtError_t CheckCopySide(const DeviceMemory& memory, const char* api, bool is_dst, const void* p,
                         size_t count, const Sides& sides) {
  const char* role = is_dst ? "dst" : "src";
  const bool on_device = is_dst ? sides.dst_on_device : sides.src_on_device;
  Sides flipped = sides;
  (is_dst ? flipped.dst_on_device : flipped.src_on_device) = !on_device;
  if (on_device) {
    const std::string remedy =
        StrCat(KindName(sides), " expects it in device memory from nrtMalloc;",
               " for host memory use ", KindName(flipped));
    return CheckDeviceRange(memory, api, role, p, count, NRT_ERROR_INVALID_MEMCPY_KIND,
                            remedy.c_str());
  }
  const std::optional<Block> block = memory.Find(p);
  if (block && block->device != kPinnedHost) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_MEMCPY_KIND, api, ": ", role, " ", p,
                       " is device memory on npu:", block->device, " but ", KindName(sides),
                       " expects host memory; use ", KindName(flipped));
  }
  return NRT_SUCCESS;
}

nrtError_t CheckCopy(const DeviceMemory& memory, const char* api, void* dst, const void* src,
                     size_t count, nrtMemcpyKind kind) {
  const std::optional<Sides> sides = SidesOf(kind);
  if (!sides) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_MEMCPY_KIND, api, ": unknown memcpy kind ",
                       static_cast<int>(kind), "; use one of the nrtMemcpyKind values");
  }
  if (count == 0) return NRT_SUCCESS;
  if (dst == nullptr || src == nullptr) {
    return NPU_RT_FAIL(NRT_ERROR_INVALID_VALUE, api, ": ", dst == nullptr ? "dst" : "src",
                       " is NULL for a copy of ", count, " bytes");
  }
  if (nrtError_t error = CheckCopySide(memory, api, /*is_dst=*/true, dst, count, *sides)) {
    return error;
  }
  return CheckCopySide(memory, api, /*is_dst=*/false, src, count, *sides);
}

}  // namespace
}  // namespace npu::runtime

namespace npu::runtime {
namespace {

// An async copy on a capturing stream: recorded, unless a host side is pageable memory, whose
// contents at replay time the caller cannot be relied on to keep (as CUDA refuses them).
std::optional<nrtError_t> CaptureCopy(Stream& stream, void* dst, const void* src, size_t count, nrtMemcpyKind kind) {
  const Sides sides = *SidesOf(kind);
  const bool pageable = (!sides.dst_on_device && !nrtIsPinnedHostPtr(dst)) ||
                        (!sides.src_on_device && !nrtIsPinnedHostPtr(src));
  if (pageable) {
    std::shared_ptr<Capture> capture = stream.capture();
    if (!capture) return std::nullopt;
    const char* what = sides.src_on_device
                           ? "reads npu memory into pageable host memory (.cpu(), .item(), .tolist(), print of an npu "
                             "tensor?): captured work has not run, so there is nothing to read yet"
                           : "copies pageable host memory (a CPU tensor moved to npu?), which a replay would read "
                             "long after the call; copy from pinned memory (tensor.pin_memory()) or before the capture";
    return capture->Refuse(NRT_ERROR_CAPTURE_UNSUPPORTED,
                           StrCat("nrtMemcpyAsync (", KindName(kind), ", ", count, " bytes) on ", stream.name(),
                                  " is not allowed while it is capturing: it ", what));
  }
  GraphNode node;
  node.run = [dst, src, count] {
    CopyBytes(dst, src, count);
    return 0;
  };
  node.kind = "memcpy";
  return RecordLaunch(stream, std::move(node));
}

}  // namespace
}  // namespace npu::runtime

using npu::runtime::Runtime;

extern "C" {

nrtError_t nrtMemcpy(void* dst, const void* src, size_t count, nrtMemcpyKind kind) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    if (nrtError_t error =
            npu::runtime::CheckCopy(rt.memory(), "nrtMemcpy", dst, src, count, kind)) {
      return error;
    }
    if (count == 0) return NRT_SUCCESS;
    if (nrtError_t error = npu::runtime::CheckSyncAllowed("nrtMemcpy", nullptr)) return error;
    if (npu::runtime::FaultInjector* faults = rt.faults()) {
      const int device = rt.current_device();
      if (faults->Lost(device)) return faults->FailLost(device, "nrtMemcpy");
      if (std::optional<std::string> injected = faults->OnMemcpy(device)) {
        return NPU_RT_FAIL(NRT_ERROR_TASK_FAILED, "memcpy (", npu::runtime::KindName(kind), ", ", count,
                           " bytes) failed on npu:", device, ": ", *injected);
      }
    }
    const uint64_t start = npu::runtime::activity::Active() ? npu::runtime::activity::Now() : 0;
    npu::runtime::CopyBytes(dst, src, count);
    if (start != 0) {
      npu::runtime::activity::CopyRan(rt.current_device(), count, kind, start, npu::runtime::activity::Now());
    }
    NPU_RT_LOG(kDebug, "nrtMemcpy copied ", count, " bytes ", src, " -> ", dst, " (",
               npu::runtime::KindName(kind), ")");
    return NRT_SUCCESS;
  });
}

nrtError_t nrtMemcpyAsync(void* dst, const void* src, size_t count, nrtMemcpyKind kind,
                          nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    npu::runtime::Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    if (nrtError_t error =
            npu::runtime::CheckCopy(rt.memory(), "nrtMemcpyAsync", dst, src, count, kind)) {
      return error;
    }
    if (count == 0) return NRT_SUCCESS;
    if (found->capturing()) {
      if (auto recorded = npu::runtime::CaptureCopy(*found, dst, src, count, kind)) return *recorded;
    }
    NPU_RT_LOG(kDebug, "nrtMemcpyAsync queued ", count, " bytes ", src, " -> ", dst, " (",
               npu::runtime::KindName(kind), ") on ", found->name());
    if (npu::runtime::activity::Active()) {
      npu::runtime::activity::LabelTask(NRT_ACTIVITY_MEMCPY, nullptr, count, kind);
    }
    if (npu::runtime::FaultInjector* faults = rt.faults(); faults != nullptr && faults->any_memcpy()) {
      if (std::optional<std::string> injected = faults->OnMemcpy(found->device())) {
        // Fails in stream order, like a copy the device could not complete.
        std::string message = npu::runtime::StrCat("memcpy (", npu::runtime::KindName(kind), ", ", count,
                                                   " bytes) failed on ", found->name(), ": ", *injected);
        return found->Enqueue([message = std::move(message)] {
          nrtSetTaskErrMsg(message.c_str());
          return 1;
        }, false, "memcpy");
      }
    }
    return found->Enqueue([dst, src, count] {
      npu::runtime::CopyBytes(dst, src, count);
      return 0;
    });
  });
}

nrtError_t nrtMemsetAsync(void* dst, int value, size_t count, nrtStream_t stream) {
  return npu::runtime::WithRuntime([&](Runtime& rt) {
    npu::runtime::Stream* found = nullptr;
    if (nrtError_t error = rt.streams().ResolveCached(stream, rt.current_device(), &found)) {
      return error;
    }
    if (count == 0) return NRT_SUCCESS;
    if (nrtError_t error = npu::runtime::CheckDeviceRange(
            rt.memory(), "nrtMemsetAsync", "dst", dst, count, NRT_ERROR_INVALID_POINTER,
            "nrtMemsetAsync sets device memory from nrtMalloc only")) {
      return error;
    }
    NPU_RT_LOG(kDebug, "nrtMemsetAsync queued ", count, " bytes at ", dst, " to ", value, " on ",
               found->name());
    // A recorded memset is profiled when replayed (Stream::RunGraph), not labelled here.
    if (npu::runtime::activity::Active() && !found->capturing()) {
      npu::runtime::activity::LabelTask(NRT_ACTIVITY_MEMSET, nullptr, count);
    }
    return npu::runtime::EnqueueOrRecord(*found, [dst, value, count] {
      std::memset(dst, value, count);
      return 0;
    }, nullptr, "memset");
  });
}

}  // extern "C"

extern "C" void nrtSetHostCopy(nrtHostCopyFn copy) {
  npu::runtime::g_host_copy.store(copy, std::memory_order_release);
}

// CopyKernelNpu.cpp - copy_ between npu and host and across npu devices, with dtype conversion,
// broadcasting and arbitrary strides. Contiguous same-dtype copies are runtime memcpys (on the
// calling thread when a blocking copy finds its stream idle); the rest run as host tasks on the
// stream over zero-copy views.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "csrc/core/NPUSyncDebug.h"
#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUHostAllocator.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/HostView.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using c10_npu::NPUStream;

bool isNpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// True when the copy is a plain byte copy of one dense block.
bool bytewiseCopyable(const at::Tensor& src, const at::Tensor& dst) {
  return src.dtype() == dst.dtype() && src.sizes() == dst.sizes() && src.is_contiguous() &&
         dst.is_contiguous() && src.is_conj() == dst.is_conj() && src.is_neg() == dst.is_neg();
}

// Makes `waiter` wait for everything queued so far on `signaller`.
void streamWaitStream(const NPUStream& waiter, const NPUStream& signaller) {
  nrtEvent_t ready = nullptr;
  NPU_CHECK(nrtEventCreate(&ready));
  nrtError_t err = nrtEventRecord(ready, signaller.handle());
  if (err == NRT_SUCCESS) err = nrtStreamWaitEvent(waiter.handle(), ready);
  nrtEventDestroy(ready);  // the runtime keeps it alive while the waiter needs it
  NPU_CHECK(err);
}

void copyBetweenNpus(const at::Tensor& src, const at::Tensor& dst) {
  c10::DeviceGuard guard(dst.device());
  NPUStream stream = c10_npu::getCurrentNPUStream(dst.device().index());
  const bool cross_device = src.device() != dst.device();
  NPUStream src_stream = c10_npu::getCurrentNPUStream(src.device().index());
  // A cross-device copy is ordered on both devices' current streams: after the work already queued
  // for src, and before any work queued later on src's device (which may overwrite src).
  if (cross_device) streamWaitStream(stream, src_stream);
  if (bytewiseCopyable(src, dst)) {
    NPU_CHECK(nrtMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                             NRT_MEMCPY_DEVICE_TO_DEVICE, stream.handle()));
  } else if (!cross_device && deviceOpsSupport({src, dst})) {
    EXEC_NPU_CMD(aclnnInplaceCopy, dst, src);  // strided / broadcasting / dtype-converting
  } else {
    launchDeviceTask(stream, "aten::copy_ (npu -> npu)",
                            [src = hostView(src), dst = hostView(dst)] { dst.copy_(src); });
  }
  if (cross_device) streamWaitStream(src_stream, stream);
}

// A blocking copy between pageable host memory and the device: when the stream has nothing queued,
// nothing can still be writing the source or reading the destination, so the copy runs right
// here instead of crossing to the stream's worker and back. The stream is still synchronised
// after it, so that an earlier task's failure surfaces here as at any synchronising call.
bool copyNowIfIdle(const NPUStream& stream, void* dst, const void* src, size_t nbytes,
                   nrtMemcpyKind kind) {
  if (nrtStreamQuery(stream.handle()) != NRT_SUCCESS) return false;
  NPU_CHECK(nrtMemcpy(dst, src, nbytes, kind));
  stream.synchronize();
  return true;
}

void copyHostToNpu(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (!non_blocking) c10_npu::warnOrErrorOnSync("a blocking copy from the host to npu");
  c10::DeviceGuard guard(dst.device());
  NPUStream stream = c10_npu::getCurrentNPUStream(dst.device().index());
  // Pageable memory is copied synchronously even with non_blocking (as CUDA does).
  if (bytewiseCopyable(src, dst) && !c10_npu::isPinnedPtr(src.storage().data()) &&
      copyNowIfIdle(stream, dst.data_ptr(), src.const_data_ptr(), dst.nbytes(),
                    NRT_MEMCPY_HOST_TO_DEVICE)) {
    return;
  }
  at::Tensor staged = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous().resolve_conj().resolve_neg();
  const bool pinned = c10_npu::isPinnedPtr(staged.storage().data());
  if (non_blocking && !pinned && staged.is_alias_of(src)) {
    staged = staged.clone();  // pageable memory: later host writes must not race the copy
  }
  if (dst.is_contiguous()) {
    NPU_CHECK(nrtMemcpyAsync(dst.data_ptr(), staged.data_ptr(), dst.nbytes(),
                             NRT_MEMCPY_HOST_TO_DEVICE, stream.handle()));
  } else {
    launchDeviceTask(stream, "aten::copy_ (cpu -> npu)",
                            [staged, dst = hostView(dst)] { dst.copy_(staged); });
  }
  if (!non_blocking) {
    stream.synchronize();
  } else if (pinned) {
    c10_npu::recordPinnedOnStream(staged.storage(), stream);
  } else {
    launchDeviceTask(stream, "release staging buffer", [staged] {});
  }
}

// Host pages in [p, p + n) that no one has touched yet (they will take host memory when written).
size_t freshHostBytes(const void* p, size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  std::vector<unsigned char> resident((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) return 0;
  size_t fresh = 0;
  for (unsigned char r : resident) fresh += (r & 1) ? 0 : page;
  return fresh;
}

// The software NPU's device memory is host memory too: a copy to the host that would need more fresh
// host pages than the host has left raises OutOfMemoryError, instead of the kernel killing the
// process halfway through it. Small copies, and copies the host has room for anyway, skip the check.
void checkHostRoomFor(const at::Tensor& dst) {
  const size_t nbytes = dst.nbytes();
  if (nbytes < (size_t{64} << 20)) return;
  size_t room = 0, total = 0;
  if (nrtHostMemGetInfo(&room, &total) != NRT_SUCCESS || nbytes <= room) return;
  const size_t fresh = freshHostBytes(dst.const_data_ptr(), nbytes);
  TORCH_CHECK_WITH(OutOfMemoryError, fresh <= room, "NPU to host copy out of memory: copying ",
                   c10_npu::NPUCachingAllocator::formatBytes(nbytes), " from npu to the host needs ", c10_npu::NPUCachingAllocator::formatBytes(fresh),
                   " more host memory, but the host can spare only ", c10_npu::NPUCachingAllocator::formatBytes(room), " (of ",
                   c10_npu::NPUCachingAllocator::formatBytes(total), "). The software NPU's device memory is host memory: free npu ",
                   "tensors you no longer need (or torch.npu.empty_cache()), copy in smaller pieces, or use fewer "
                   "devices.");
}

void copyNpuToHost(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  c10::DeviceGuard guard(src.device());
  checkHostRoomFor(dst);
  NPUStream stream = c10_npu::getCurrentNPUStream(src.device().index());
  const bool async = non_blocking && c10_npu::isPinnedPtr(dst.storage().data());
  if (!async) c10_npu::warnOrErrorOnSync("a blocking copy from npu to the host (.cpu(), .item(), .tolist(), ...)");
  if (!async && bytewiseCopyable(src, dst) &&
      copyNowIfIdle(stream, dst.data_ptr(), src.const_data_ptr(), dst.nbytes(),
                    NRT_MEMCPY_DEVICE_TO_HOST)) {
    return;
  }
  if (bytewiseCopyable(src, dst)) {
    NPU_CHECK(nrtMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                             NRT_MEMCPY_DEVICE_TO_HOST, stream.handle()));
  } else {
    launchDeviceTask(stream, "aten::copy_ (npu -> cpu)",
                            [src = hostView(src), dst = dst.alias()] { dst.copy_(src); });
  }
  // Only pinned destinations may be filled asynchronously (as with CUDA).
  if (async) {
    c10_npu::recordPinnedOnStream(dst.storage(), stream);
  } else {
    stream.synchronize();
  }
}

// Copies where either side is in a private format (the caller saw anyPrivateFormat()). A whole
// private destination is filled through a plain tensor of its shape and one TransData; a view of
// one through its base-layout stand-in; a private source is read through its stand-in. Returns
// false when neither side is private.
bool copyWithFormats(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const NPUStorageDesc* src_desc = isNpu(src) ? privateDesc(src) : nullptr;
  const NPUStorageDesc* dst_desc = isNpu(dst) ? privateDesc(dst) : nullptr;
  if (src_desc == nullptr && dst_desc == nullptr) return false;
  c10::DeviceGuard guard(isNpu(dst) ? dst.device() : src.device());
  if (src_desc != nullptr && dst_desc != nullptr && src.device() == dst.device() &&
      isWholeTensor(src, *src_desc) && isWholeTensor(dst, *dst_desc) &&
      src.storage().nbytes() == dst.storage().nbytes() && src_desc->npu_format == dst_desc->npu_format &&
      src_desc->storage_sizes == dst_desc->storage_sizes) {
    // Same layout: the storage bytes as they are.
    NPU_CHECK(nrtMemcpyAsync(dst.storage().mutable_data(), src.storage().data(), dst.storage().nbytes(),
                             NRT_MEMCPY_DEVICE_TO_DEVICE,
                             c10_npu::getCurrentNPUStream(dst.device().index()).handle()));
    return true;
  }
  if (src_desc != nullptr && dst_desc != nullptr && src.device() == dst.device() &&
      isWholeTensor(src, *src_desc) && isWholeTensor(dst, *dst_desc) && src.dtype() == dst.dtype()) {
    transDataBetweenPrivate(src.storage(), *src_desc, dst.storage(), *dst_desc);  // one TransData
    return true;
  }
  if (dst_desc != nullptr && isWholeTensor(dst, *dst_desc)) {
    at::Tensor staged = at::empty(dst.sizes(), dst.options());
    staged.copy_(src, non_blocking);
    transDataToPrivate(staged, dst.storage(), *dst_desc);
    return true;
  }
  BaseLayouts layouts;
  const at::Tensor s = layouts.get(src, /*written=*/false);
  const at::Tensor d = layouts.get(dst, /*written=*/true);
  d.copy_(s, non_blocking);
  layouts.commit();
  return true;
}

}  // namespace

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(isNpu(self) || self.is_cpu(), "copy_: cannot copy from ", self.device(), " to ",
              dst.device());
  TORCH_CHECK(isNpu(dst) || dst.is_cpu(), "copy_: cannot copy from ", self.device(), " to ",
              dst.device());
  if (dst.numel() == 0 || self.is_same(dst)) return dst;
  // copy_ broadcasts src to dst; anything else is the error the CPU gives.
  TORCH_CHECK(at::infer_size(dst.sizes(), self.sizes()) == dst.sizes(), "copy_: source of shape ",
              self.sizes(), " cannot be broadcast to the destination shape ", dst.sizes());
  if (C10_UNLIKELY(anyPrivateFormat()) && copyWithFormats(self, dst, non_blocking)) return dst;
  if (isNpu(self) && isNpu(dst)) {
    copyBetweenNpus(self, dst);
  } else if (isNpu(dst)) {
    copyHostToNpu(self, dst, non_blocking);
  } else {
    copyNpuToHost(self, dst, non_blocking);
  }
  return dst;
}

at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return at_npu::native::_copy_from(self, dst, false);
}

at::Scalar _local_scalar_dense(const at::Tensor& self) {
  // item() takes any one-element tensor ([1], [1, 1], ...): read it in its own shape.
  at::Tensor host = at::empty(self.sizes(), self.options().device(c10::DeviceType::CPU));
  at_npu::native::_copy_from(self, host, false);
  return host.item();
}

}  // namespace at_npu::native

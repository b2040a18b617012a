// NPUHooks.cpp - PrivateUse1 hooks: availability, device count, generators, pinned memory, storage resize.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/core/NPUHostAllocator.h"
#include "csrc/core/NPUStream.h"

namespace c10_npu {
namespace {

struct NPUHooks final : public at::PrivateUse1HooksInterface {
  /// The software NPU is always built in.
  bool isBuilt() const override { return true; }
  /// Available when the runtime reports at least one device (no device work is started).
  bool isAvailable() const override { return device_count() > 0; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  /// The runtime has no per-device context to create.
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    check_device_index(device_index);
    return true;
  }
  void init() const override { device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = current_device();
    set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return getDefaultNPUGenerator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return createNPUGenerator(device_index);
  }
  /// Which npu owns a device pointer (used by torch.from_dlpack and friends).
  at::Device getDeviceFromPtr(void* data) const override {
    int32_t device = 0;
    NPU_CHECK(nrtPointerGetDevice(data, &device));
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)};
  }
  bool isPinnedPtr(const void* data) const override { return c10_npu::isPinnedPtr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return getPinnedHostAllocator(); }
  /// Storage.resize_ for npu storages: new memory, old bytes copied over.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    TORCH_CHECK(static_cast<int64_t>(newsize) >= 0,
                "storage resize_: the new size must be a non-negative number of bytes, got ",
                static_cast<int64_t>(newsize));
    c10::DeviceGuard guard(storage.device());  // the new block belongs to the storage's device
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep > 0) {
      NPUStream stream = getCurrentNPUStream();
      NPU_CHECK(nrtMemcpyAsync(fresh.get(), impl->data(), keep, NRT_MEMCPY_DEVICE_TO_DEVICE,
                               stream.handle()));
      stream.synchronize();  // the old block is freed right after this
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

struct Registration {
  Registration() { at::RegisterPrivateUse1HooksInterface(new NPUHooks()); }
} registration;

}  // namespace
}  // namespace c10_npu

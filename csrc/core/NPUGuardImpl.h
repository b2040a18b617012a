// NPUGuardImpl.h - c10 device guard for npu: device switching, streams and events (torch.Stream/Event,
// torch.accelerator and every DeviceGuard go through this).
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace c10_npu {

struct NPUGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  NPUGuardImpl() = default;
  explicit NPUGuardImpl(c10::DeviceType t);

  /// Always PrivateUse1 (renamed "npu" from Python).
  c10::DeviceType type() const override { return static_type; }
  /// Sets the device, returns the previous one.
  c10::Device exchangeDevice(c10::Device d) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device d) const override;
  /// Used by guard destructors: must not throw.
  void uncheckedSetDevice(c10::Device d) const noexcept override;
  /// Current stream of this thread for the device.
  c10::Stream getStream(c10::Device d) const override;
  c10::Stream getDefaultStream(c10::Device d) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority = false) const override;
  /// New streams come from the pool (round robin), so creating many never exhausts threads.
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override;
  c10::Stream exchangeStream(c10::Stream s) const override;
  c10::DeviceIndex deviceCount() const noexcept override;

  /// Events are runtime events created lazily on first record.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex device_index) const override;

  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;
  /// Keeps the allocation alive for work queued on `stream` (Tensor.record_stream).
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override;
};

}  // namespace c10_npu

// NPUGenerator.cpp - per-device generators backed by a host engine.
#include "csrc/core/NPUGenerator.h"

#include "csrc/core/NPUGraph.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "csrc/core/NPUFunctions.h"

namespace c10_npu {

NPUGeneratorImpl::NPUGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::detail::createCPUGenerator(seed)) {}

void NPUGeneratorImpl::set_current_seed(uint64_t seed) {
  if (uint64_t* position = captureDrawPosition(this)) {
    // Captured draws are made at replay time from the generator as it is then: only a no-op seeding
    // (which restarts the capture's draws) keeps the graph meaningful.
    TORCH_CHECK(seed == engine_.current_seed(),
                "NPUGeneratorImpl::set_current_seed can be called during stream capture only if new seed is the "
                "same as the original seed.");
    *position = 0;
    return;
  }
  engine_.set_current_seed(seed);
  philox_offset_ = 0;
}
uint64_t NPUGeneratorImpl::current_seed() const { return engine_.current_seed(); }
uint64_t NPUGeneratorImpl::seed() {
  philox_offset_ = 0;
  return engine_.seed();
}
// The offset is that of the counter-based ops (philoxEngineInputs); the host engine has none.
void NPUGeneratorImpl::set_offset(uint64_t offset) { philox_offset_ = offset; }
uint64_t NPUGeneratorImpl::get_offset() const { return philox_offset_; }

std::pair<uint64_t, uint64_t> NPUGeneratorImpl::philoxEngineInputs(uint64_t increment) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t offset = philox_offset_;
  philox_offset_ += increment;
  return {engine_.current_seed(), offset};
}

// Inside a capture the state carries, after the host engine's, the capture's draw position (8 bytes):
// restoring it inside the capture replays the same draws (activation checkpointing does this).
void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  c10::intrusive_ptr<c10::TensorImpl> current = engine_.unsafeGetGeneratorImpl()->get_state();
  const size_t engine_bytes = current->numel();
  const size_t given = new_state.numel();
  TORCH_CHECK_VALUE(given == engine_bytes || given == engine_bytes + sizeof(uint64_t),
                    "npu generator state must have ", engine_bytes, " (or ", engine_bytes + sizeof(uint64_t),
                    ") bytes, got ", given);
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  if (uint64_t* position = captureDrawPosition(this)) {
    TORCH_CHECK(std::memcmp(bytes, current->data(), engine_bytes) == 0,
                "NPUGeneratorImpl::set_current_seed can be called during stream capture only if new seed is the "
                "same as the original seed.");
    uint64_t restored = 0;
    if (given > engine_bytes) std::memcpy(&restored, bytes + engine_bytes, sizeof restored);
    *position = restored;
    return;
  }
  if (given == engine_bytes) {
    engine_.unsafeGetGeneratorImpl()->set_state(new_state);
    return;
  }
  at::Tensor engine_state = at::empty({static_cast<int64_t>(engine_bytes)}, at::kByte);
  std::memcpy(engine_state.data_ptr(), bytes, engine_bytes);
  engine_.unsafeGetGeneratorImpl()->set_state(*engine_state.unsafeGetTensorImpl());
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  c10::intrusive_ptr<c10::TensorImpl> state = engine_.unsafeGetGeneratorImpl()->get_state();
  uint64_t* position = captureDrawPosition(const_cast<NPUGeneratorImpl*>(this));
  if (position == nullptr) return state;
  const size_t engine_bytes = state->numel();
  at::Tensor extended = at::empty({static_cast<int64_t>(engine_bytes + sizeof(uint64_t))}, at::kByte);
  std::memcpy(extended.data_ptr(), state->data(), engine_bytes);
  std::memcpy(static_cast<uint8_t*>(extended.data_ptr()) + engine_bytes, position, sizeof(uint64_t));
  return extended.getIntrusivePtr();
}

NPUGeneratorImpl* NPUGeneratorImpl::clone_impl() const {
  auto* copy = new NPUGeneratorImpl(device().index());
  copy->engine_ = engine_.clone();
  copy->philox_offset_ = philox_offset_;
  return copy;
}

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator>* generators = nullptr;
  std::call_once(once, [] {
    generators = new std::vector<at::Generator>();
    for (int i = 0; i < device_count(); ++i) {
      generators->push_back(at::make_generator<NPUGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
    }
  });
  if (device < 0) device = current_device();
  check_device_index(device);
  return (*generators)[device];
}

at::Generator createNPUGenerator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<NPUGeneratorImpl>(device);
}

at::Generator hostEngineFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (gen.has_value() && gen->defined()) {
    if (gen->device().type() == c10::DeviceType::CPU) return *gen;
    TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
                "expected an npu or cpu generator, got one for ", gen->device());
    return gen->get<NPUGeneratorImpl>()->engine();
  }
  return getDefaultNPUGenerator(device).get<NPUGeneratorImpl>()->engine();
}

uint64_t launchSeedFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (anyCaptureUnderway()) {
    // A capture on this thread makes the draw at each replay instead (captureRandomSlot).
    c10::GeneratorImpl* impl = gen.has_value() && gen->defined() ? gen->unsafeGetGeneratorImpl()
                                                                 : getDefaultNPUGenerator(device).unsafeGetGeneratorImpl();
    if (std::optional<uint64_t> slot = captureRandomSlot(impl)) return *slot;
  }
  at::Generator engine = hostEngineFor(gen, device);
  std::lock_guard<std::mutex> lock(engine.mutex());
  return engine.get<at::CPUGeneratorImpl>()->random64();
}

at::Generator launchEngineFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  return at::detail::createCPUGenerator(launchSeedFor(gen, device));
}

}  // namespace c10_npu

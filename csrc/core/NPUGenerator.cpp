// NPUGenerator.cpp - per-device generators backed by a host engine.
#include "csrc/core/NPUGenerator.h"

#include "csrc/core/NPUGraph.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

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

void NPUGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  engine_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> NPUGeneratorImpl::get_state() const {
  return engine_.unsafeGetGeneratorImpl()->get_state();
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
  noteRandomLaunch();  // a graph capturing this launch mixes a fresh seed into it per replay
  at::Generator engine = hostEngineFor(gen, device);
  std::lock_guard<std::mutex> lock(engine.mutex());
  return engine.get<at::CPUGeneratorImpl>()->random64();
}

at::Generator launchEngineFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  return at::detail::createCPUGenerator(launchSeedFor(gen, device));
}

}  // namespace c10_npu

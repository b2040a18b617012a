// NPUGenerator.h - per-device random generator. The software NPU runs random kernels on the host,
// so the generator's engine is a host (Mersenne Twister) generator owned by the npu device.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <utility>

namespace c10_npu {

struct NPUGeneratorImpl final : public c10::GeneratorImpl {
  explicit NPUGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;  // non-deterministic reseed, returns the new seed
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The host generator that random kernels on this device draw from.
  const at::Generator& engine() const { return engine_; }

  // (seed, offset) for counter-based random ops (the dropout masks of fused attention), as torch_npu's
  // philox_engine_inputs: the offset starts at 0 with each seed and advances by `increment` per call.
  std::pair<uint64_t, uint64_t> philoxEngineInputs(uint64_t increment);

 private:
  NPUGeneratorImpl* clone_impl() const override;
  at::Generator engine_;
  uint64_t philox_offset_ = 0;
};

const at::Generator& getDefaultNPUGenerator(c10::DeviceIndex device = -1);
at::Generator createNPUGenerator(c10::DeviceIndex device = -1);

// The host engine to pass to a host kernel in place of `gen` (an npu generator or none).
at::Generator hostEngineFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

// A fresh host generator for one queued random op, seeded by one draw from `gen` (or the device's
// default generator) at launch: the npu generator advances in launch order, so results are
// reproducible however late the op runs.
at::Generator launchEngineFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device);
// The seed launchEngineFor would use: what named random device ops take as their argument.
uint64_t launchSeedFor(const std::optional<at::Generator>& gen, c10::DeviceIndex device);

}  // namespace c10_npu

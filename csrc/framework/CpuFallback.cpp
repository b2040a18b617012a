// CpuFallback.cpp - copying CPU fallback with npu generator substitution and view-op handling.
#include "csrc/framework/CpuFallback.h"

#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_set>

#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/framework/HostView.h"

namespace at_npu::native {
namespace {

bool fallbackDisabled() {
  static const bool disabled = [] {
    const char* v = std::getenv("NPU_SIM_FALLBACK");
    return v != nullptr && std::string(v) == "0";
  }();
  return disabled;
}

void warnOnce(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(name).second) {
    TORCH_WARN(name, " is not supported on npu; it ran on the CPU (inputs copied to the host and ",
               "results back). Set NPU_SIM_FALLBACK=0 to make this an error.");
  }
}

bool isNpuTensor(const c10::IValue& v) {
  return v.isTensor() && v.toTensor().defined() &&
         v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

c10::DeviceIndex firstNpuDevice(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) {
    if (isNpuTensor(v)) return v.toTensor().device().index();
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) return t.device().index();
      }
    }
  }
  return -1;
}

bool isGeneratorArg(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

// Random host kernels must draw from the npu device's generator, not the CPU default one.
void substituteGenerators(const c10::FunctionSchema& schema, torch::jit::Stack* stack) {
  const auto& args = schema.arguments();
  const size_t first = stack->size() - args.size();
  c10::DeviceIndex device = firstNpuDevice(c10::ArrayRef<c10::IValue>(*stack).slice(first));
  for (size_t i = 0; i < args.size(); ++i) {
    if (!isGeneratorArg(args[i])) continue;
    c10::IValue& v = (*stack)[first + i];
    std::optional<at::Generator> gen;
    if (!v.isNone()) gen = v.toGenerator();
    v = c10::IValue(c10_npu::hostEngineFor(gen, device < 0 ? c10_npu::current_device() : device));
  }
}

// A view op (single return aliasing its first argument without writing it).
bool isViewOp(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1 || schema.arguments().empty()) return false;
  const auto* ret = schema.returns()[0].alias_info();
  const auto* arg = schema.arguments()[0].alias_info();
  return ret && arg && !ret->isWrite() && ret->beforeSets() == arg->beforeSets() &&
         schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
}

// Runs the CPU kernel on a host view (metadata only) and rebuilds the result as an npu view.
void runViewOp(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  at::Tensor self = (*stack)[first].toTensor();
  (*stack)[first] = hostView(self);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  at::Tensor host = stack->back().toTensor();
  stack->pop_back();
  const auto byte_offset = static_cast<const char*>(host.data_ptr()) -
                           static_cast<const char*>(self.storage().data());
  at::Tensor result = at::empty({0}, self.options().dtype(host.scalar_type()));
  result.set_(self.storage(), byte_offset / static_cast<int64_t>(host.element_size()), host.sizes(),
              host.strides());
  stack->emplace_back(std::move(result));
}

}  // namespace

void npuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  TORCH_CHECK_NOT_IMPLEMENTED(!fallbackDisabled(), name,
                              " is not implemented for npu and the CPU fallback is disabled ",
                              "(NPU_SIM_FALLBACK=0). Unset NPU_SIM_FALLBACK to run it on the CPU.");
  if (isViewOp(schema) && isNpuTensor((*stack)[stack->size() - schema.arguments().size()])) {
    runViewOp(op, stack);
    return;
  }
  warnOnce(name);
  substituteGenerators(schema, stack);
  at::native::cpu_fallback(op, stack);
}

}  // namespace at_npu::native

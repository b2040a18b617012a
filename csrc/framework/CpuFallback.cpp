// CpuFallback.cpp - copying CPU execution with npu generator substitution and device arguments.
#include "csrc/framework/CpuFallback.h"

#include <ATen/native/CPUFallback.h>

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/framework/ExecutionPolicy.h"
#include "csrc/framework/OpStats.h"
#include "csrc/framework/ReducedPrecision.h"

namespace at_npu::native {
namespace {

std::string opName(const c10::FunctionSchema& schema) {
  std::string name = schema.operator_name().name;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  return name;
}

void warnOnce(const std::string& name) {
  static std::mutex mutex;
  static std::unordered_set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(name).second) {
    TORCH_WARN(name, " is not supported on npu; it ran on the CPU (NPU_SIM_STRICT=1: only named ",
               "device ops run on the device; NPU_SIM_FALLBACK=0 makes this an error)");
  }
}

bool isNpuDevice(const c10::IValue& v) {
  return v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1;
}

c10::DeviceIndex firstNpuDevice(c10::ArrayRef<c10::IValue> args) {
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined() &&
        v.toTensor().device().type() == c10::DeviceType::PrivateUse1) {
      return v.toTensor().device().index();
    }
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) return t.device().index();
      }
    }
  }
  for (const auto& v : args) {
    if (isNpuDevice(v) && v.toDevice().has_index()) return v.toDevice().index();
  }
  return -1;
}

bool isGeneratorArg(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

}  // namespace

void runOnCpuWithCopies(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t first = stack->size() - args.size();
  c10::DeviceIndex device = firstNpuDevice(c10::ArrayRef<c10::IValue>(*stack).slice(first));
  if (device < 0) device = c10_npu::current_device();
  bool had_npu_device_arg = false;
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (isGeneratorArg(args[i])) {
      // Random host kernels must draw from the npu device's generator, not the CPU default one.
      std::optional<at::Generator> gen;
      if (!v.isNone()) gen = v.toGenerator();
      v = c10::IValue(c10_npu::hostEngineFor(gen, device));
    } else if (isNpuDevice(v)) {
      v = c10::IValue(c10::Device(c10::DeviceType::CPU));
      had_npu_device_arg = true;
    }
  }
  const bool had_npu_tensor =
      firstNpuDevice(c10::ArrayRef<c10::IValue>(*stack).slice(first)) >= 0;
  std::vector<c10::IValue> saved(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  try {
    at::native::cpu_fallback(op, stack);
  } catch (const c10::Error& e) {
    if (!isMissingReducedPrecisionKernel(e.what_without_backtrace())) throw;
    // The CPU has no float16 / bfloat16 kernel: compute in float32, as an NPU would natively.
    stack->resize(first);
    stack->insert(stack->end(), saved.begin(), saved.end());
    runUpcast(op, stack, [&](torch::jit::Stack* s) { at::native::cpu_fallback(op, s); });
  }
  if (had_npu_device_arg && !had_npu_tensor) {
    // A factory op: cpu_fallback has no input device to return to.
    const c10::Device target(c10::DeviceType::PrivateUse1, device);
    const size_t nret = op.schema().returns().size();
    for (size_t i = stack->size() - nret; i < stack->size(); ++i) {
      if ((*stack)[i].isTensor()) (*stack)[i] = (*stack)[i].toTensor().to(target);
    }
  }
}

void npuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = opName(op.schema());
  TORCH_CHECK_NOT_IMPLEMENTED(executionPolicy().fallback_enabled, name,
                              " is not supported on npu: it has no named device op ",
                              "(NPU_SIM_STRICT=1) and the CPU fallback is disabled ",
                              "(NPU_SIM_FALLBACK=0).");
  warnOnce(name);
  countOp(opCounters(op.schema().operator_name()), OpPath::kFallback);
  runOnCpuWithCopies(op, stack);
}

}  // namespace at_npu::native

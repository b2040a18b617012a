// GenericExecutor.cpp - Meta-inferred outputs + CPU kernel queued on the stream over host views.
#include "csrc/framework/GenericExecutor.h"

#include <ATen/ops/_neg_view.h>
#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <ATen/CPUGeneratorImpl.h>
#include <npu/graph.h>

#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/CpuFallback.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/ExecutionPolicy.h"
#include "csrc/framework/FormatStaging.h"
#include "csrc/framework/HostView.h"
#include "csrc/framework/IValueTensors.h"
#include "csrc/framework/OpStats.h"
#include "csrc/framework/OutVariants.h"
#include "csrc/framework/OverflowCheck.h"
#include "csrc/framework/ReducedPrecision.h"
#include "csrc/framework/ViewReplay.h"

namespace at_npu::native {
namespace {

constexpr auto kNpu = c10::DeviceType::PrivateUse1;

// What the executor learned about an op (computed once per op).
struct OpPlan {
  std::string name;
  OpCounters* counters = nullptr;
  std::atomic<bool> synchronous{false};  // run with copies on the calling thread
  std::optional<c10::OperatorHandle> out_variant;
  bool accumulates = false;  // float16 / bfloat16 inputs compute in float32 (ReducedPrecision.h)
};

bool isTensorLike(const c10::TypePtr& type) {
  auto kind = type->kind();
  if (kind == c10::TypeKind::OptionalType) kind = type->containedType(0)->kind();
  if (kind == c10::TypeKind::ListType) kind = type->containedType(0)->kind();
  return kind == c10::TypeKind::TensorType;
}

OpPlan& planFor(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static auto* plans = new std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpPlan>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*plans)[&op.schema()];
  if (!slot) {
    slot = std::make_unique<OpPlan>();
    const auto& schema = op.schema();
    slot->name = schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
    slot->counters = &opCounters(slot->name);
    // Data-dependent or non-tensor results need the inputs' values now; ops without a Meta kernel
    // cannot be planned ahead.
    bool tensor_returns = true;
    for (const auto& r : schema.returns()) tensor_returns &= isTensorLike(r.type());
    slot->synchronous =
        !tensor_returns || !op.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta);
    slot->out_variant = findOutVariant(op);
    slot->accumulates = accumulatesInFloat32(slot->name);
  }
  return *slot;
}

bool isNpuTensor(const at::Tensor& t) { return t.defined() && t.device().type() == kNpu; }

// The device all npu tensors share; errors like PyTorch's for mixed devices or host tensors.
c10::Device commonDevice(const OpPlan& plan, const c10::FunctionSchema& schema,
                         c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  for (size_t i = 0; i < args.size(); ++i) {
    forEachTensor(args[i], [&](const at::Tensor& t) {
      if (isNpuTensor(t)) {
        TORCH_CHECK(!device || *device == t.device(), "Expected all tensors to be on the same ",
                    "device, but found at least two devices, ", *device, " and ", t.device(),
                    "! (", plan.name, ", argument '", schema.arguments()[i].name(), "')");
        device = t.device();
      }
    });
  }
  for (size_t i = 0; i < args.size() && device; ++i) {
    const bool index_list = args[i].isOptionalTensorList();  // CPU indices are fine, as on CUDA
    forEachTensor(args[i], [&](const at::Tensor& t) {
      TORCH_CHECK(isNpuTensor(t) || (t.is_cpu() && (t.dim() == 0 || index_list)),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  *device, " and ", t.device(), "! (", plan.name, ", argument '",
                  schema.arguments()[i].name(), "'; move it with .to(\"", *device, "\"))");
    });
  }
  if (device) return *device;
  for (const auto& v : args) {
    if (v.isDevice() && v.toDevice().type() == kNpu) {
      const auto& d = v.toDevice();
      return d.has_index() ? d : c10::Device(kNpu, c10_npu::current_device());
    }
  }
  return c10::Device(kNpu, c10_npu::current_device());
}

void describeValue(std::ostream& os, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined()) os << c10::toString(t.scalar_type()) << t.sizes();
    else os << "None";
  } else if (v.isList()) {
    os << "[";
    const auto& items = v.toListRef();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) os << ", ";
      describeValue(os, items[i]);
    }
    os << "]";
  } else if (v.isScalar() || v.isNone() || v.isBool() || v.isString() || v.isDevice()) {
    os << v;
  } else {
    os << v.tagKind();
  }
}

// "(Float[2, 3], Float[3], 1)": the inputs of a failed task, for its error message.
std::string describe(c10::ArrayRef<c10::IValue> args) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) os << ", ";
    describeValue(os, args[i]);
  }
  os << ")";
  return os.str();
}

bool isGeneratorArg(const c10::Argument& arg) {
  auto kind = arg.type()->kind();
  if (kind == c10::TypeKind::OptionalType) kind = arg.type()->containedType(0)->kind();
  return kind == c10::TypeKind::GeneratorType;
}

// Index of the argument a returned alias refers to, or -1 for a fresh output.
int aliasedArgument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  if (!info || !info->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* a = schema.arguments()[i].alias_info();
    if (a && a->isWrite() && a->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

// Output metadata depends only on argument metadata and non-tensor values, so Meta results are
// cached by that signature: a training loop repeats the same shapes, and Meta kernels (some of
// them written in Python) cost far more than the kernel of a small op.
struct MetaResult {
  std::vector<c10::IValue> args;     // the Meta twins of the arguments, after the call
  std::vector<c10::IValue> returns;  // the Meta results
  bool data_dependent = false;       // the Meta function refused: outputs depend on input values
};

void appendSignature(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      key += "u;";
      return;
    }
    key += "T";
    key += std::to_string(static_cast<int>(t.scalar_type()));
    key += t.is_cpu() ? (t.unsafeGetTensorImpl()->is_wrapped_number() ? "w" : "c") : "d";
    if (t.is_conj()) key += "j";
    if (t.is_neg()) key += "n";
    for (int64_t s : t.sizes()) key += "," + std::to_string(s);
    key += "/";
    for (int64_t s : t.strides()) key += "," + std::to_string(s);
    key += ";";
  } else if (v.isTensorList() || v.isOptionalTensorList() || v.isList()) {
    key += "[";
    for (const auto& e : v.toListRef()) appendSignature(key, e);
    key += "]";
  } else if (v.isGenerator()) {
    key += "g;";
  } else {
    std::ostringstream os;
    os << v;
    key += v.tagKind() + ":" + os.str() + ";";
  }
}

std::shared_ptr<const MetaResult> inferMeta(const c10::OperatorHandle& op,
                                            c10::ArrayRef<c10::IValue> args) {
  static std::mutex mutex;
  static auto* cache = new std::unordered_map<std::string, std::shared_ptr<const MetaResult>>();
  std::string key = op.schema().name() + "." + op.schema().overload_name() + "|";
  for (const auto& v : args) appendSignature(key, v);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  torch::jit::Stack meta;
  meta.reserve(args.size());
  for (const auto& v : args) {
    if (v.isDevice() && v.toDevice().type() == kNpu) {
      meta.emplace_back(c10::Device(c10::DeviceType::Meta));
      continue;
    }
    meta.push_back(mapTensors(v, [](const at::Tensor& t) {
      if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return t;
      at::Tensor m = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::DeviceType::Meta));
      if (t.is_conj()) m = m.conj();
      if (t.is_neg()) m = at::_neg_view(m);
      return m;
    }));
  }
  auto result = std::make_shared<MetaResult>();
  result->args.assign(meta.begin(), meta.end());
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
    result->returns.assign(meta.begin(), meta.end());
  } catch (const c10::Error&) {
    throw;  // no Meta kernel, or invalid arguments: the caller decides
  } catch (const std::exception&) {
    // A Python Meta function that refuses these arguments (e.g. a boolean-mask index): remember it
    // for this signature only; the same op with other arguments may still be planned.
    result->data_dependent = true;
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() > 8192) cache->clear();  // bounded: shapes that keep changing
  cache->emplace(std::move(key), result);
  return result;
}

void runSynchronously(OpPlan& plan, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  countOp(*plan.counters, OpPath::kGenericInline);
  const auto args = torch::jit::last(*stack, op.schema().arguments().size());
  if (plan.accumulates && hasReducedPrecisionTensor(args)) {
    return runUpcast(op, stack, [&](torch::jit::Stack* s) { runOnCpuWithCopies(op, s); });
  }
  runOnCpuWithCopies(op, stack);
}

// In a graph replay, a generator made from a slot seed (a capture's random draw) is made again from
// the replay's seed for that slot (npu/graph.h), so that each replay draws what eager would.
void reseedForReplay(torch::jit::Stack& stack) {
  for (c10::IValue& v : stack) {
    if (!v.isGenerator()) continue;
    const uint64_t seed = v.toGenerator().current_seed();
    const uint64_t replayed = nrtReplaySeeded(seed);
    if (replayed != seed) v = at::detail::createCPUGenerator(replayed);
  }
}

}  // namespace

void genericExecute(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  OpPlan& plan = planFor(op);
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  const c10::Device device = commonDevice(plan, schema, args);
  if (plan.synchronous) return runSynchronously(plan, op, stack);

  // 1. Output metadata from the Meta kernel.
  std::shared_ptr<const MetaResult> inferred;
  try {
    inferred = inferMeta(op, args);
  } catch (const c10::NotImplementedError&) {
    plan.synchronous = true;  // no Meta kernel for this op at all
    return runSynchronously(plan, op, stack);
  } catch (const c10::Error&) {
    // Invalid arguments: the CPU kernel raises the real error here, at the launching line.
    return runSynchronously(plan, op, stack);
  }
  if (inferred->data_dependent) return runSynchronously(plan, op, stack);
  const std::vector<c10::IValue>& meta_args = inferred->args;
  const std::vector<c10::IValue>& meta = inferred->returns;

  c10::DeviceGuard guard(device);
  // 2. Out= / in-place arguments take the shape the Meta kernel gave them.
  for (size_t i = 0; i < nargs; ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (!info || !info->isWrite() || !args[i].isTensor()) continue;
    const at::Tensor& npu = args[i].toTensor();
    const at::Tensor& m = meta_args[i].toTensor();
    if (npu.defined() && npu.sizes() != m.sizes()) {
      // As the CPU kernel would: resize, then take the layout it computes (e.g. channels_last).
      npu.resize_(m.sizes());
      if (npu.strides() != m.strides() && npu.is_non_overlapping_and_dense() &&
          m.is_non_overlapping_and_dense()) {
        npu.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes(), m.strides(),
                                                          npu.storage_offset());
      }
    }
  }
  // 3. Fresh outputs allocated on the device.
  std::vector<c10::IValue> results;
  std::vector<at::Tensor> fresh;
  bool all_fresh = true;
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    const int alias = aliasedArgument(schema, r);
    if (alias >= 0) {
      results.push_back(args[alias]);
      all_fresh = false;
      continue;
    }
    results.push_back(mapTensors(meta[r], [&](const at::Tensor& m) {
      if (!m.defined()) {
        all_fresh = false;  // an out= overload would need a tensor for every output
        return m;
      }
      at::Tensor out = at::empty_strided(m.sizes(), m.strides(), m.options().device(device));
      fresh.push_back(out);
      return out;
    }));
  }

  // 4. The CPU kernel, queued over host views.
  const bool any_fresh = !fresh.empty();
  torch::jit::Stack host;
  host.reserve(nargs + fresh.size());
  for (size_t i = 0; i < nargs; ++i) {
    const auto& v = args[i];
    if (v.isDevice() && v.toDevice().type() == kNpu) {
      host.emplace_back(c10::Device(c10::DeviceType::CPU));
    } else if (isGeneratorArg(schema.arguments()[i])) {
      std::optional<at::Generator> gen;
      if (!v.isNone()) gen = v.toGenerator();
      host.emplace_back(c10_npu::launchEngineFor(gen, device.index()));
    } else {
      host.push_back(mapTensors(v, [](const at::Tensor& t) {
        if (!t.defined()) return t;
        if (isNpuTensor(t)) return hostView(t);
        // Host inputs are read when the task runs: snapshot them now (as CUDA takes CPU scalars by
        // value), keeping the wrapped-number flag that type promotion looks at.
        at::Tensor copy = t.clone();
        if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
          copy.unsafeGetTensorImpl()->set_wrapped_number(true);
        }
        return copy;
      }));
    }
  }
  // Accumulating ops on float16 / bfloat16 compute in float32 with the functional op.
  const bool upcast = plan.accumulates && hasReducedPrecisionTensor(args);
  std::optional<c10::OperatorHandle> out_op;
  if (any_fresh && all_fresh && !upcast) out_op = plan.out_variant;
  std::vector<at::Tensor> fresh_views;
  for (const auto& t : fresh) fresh_views.push_back(hostView(t));
  // The task keeps the outputs' geometry, not the outputs: they are Python's too, and a stream worker
  // must not drop references to them (DeferredRelease.h).
  std::vector<ViewGeometry> fresh_geometry;
  for (const auto& v : fresh_views) fresh_geometry.push_back(ViewGeometry::of(v));
  if (out_op) {
    for (const auto& v : fresh_views) host.emplace_back(v);
  }
  std::vector<at::Tensor> written;  // in-place / out= arguments, for overflow detection
  for (size_t i = 0; i < nargs && nrtOverflowDetectionEnabled(); ++i) {
    const auto* info = schema.arguments()[i].alias_info();
    if (info && info->isWrite()) forEachTensor(host[i], [&](const at::Tensor& t) { written.push_back(t); });
  }
  countOp(*plan.counters, OpPath::kGeneric);
  launchDeviceTask(
      c10_npu::getCurrentNPUStream(device.index()), plan.name.c_str(),
      [functional = op, out_op, host = std::move(host), fresh_views = std::move(fresh_views),
       fresh_geometry = std::move(fresh_geometry), any_fresh, written = std::move(written), nargs,
       upcast]() mutable {
        const TaskOverflowCheck overflow(c10::ArrayRef<c10::IValue>(host.data(), nargs), functional.schema());
        const auto run = [&](const c10::OperatorHandle& kernel, torch::jit::Stack& s) {
          const auto cpu = [&](torch::jit::Stack* st) {
            kernel.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), st);
          };
          try {
            if (upcast) return runUpcast(kernel, &s, cpu);
            torch::jit::Stack saved = s;
            try {
              cpu(&s);
            } catch (const c10::Error& e) {
              if (!isMissingReducedPrecisionKernel(e.what_without_backtrace())) throw;
              s = std::move(saved);  // the CPU has no float16 / bfloat16 kernel: compute in float32
              runUpcast(kernel, &s, cpu);
            }
          } catch (const c10::Error& e) {
            TORCH_CHECK(false, "inputs ", describe(host), ": ", e.what_without_backtrace());
          }
        };
        torch::jit::Stack s = host;
        reseedForReplay(s);
        bool copy_out = any_fresh && !out_op;
        if (out_op) {
          try {
            out_op->redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &s);
          } catch (const c10::Error& e) {
            // Some out= kernels use their output as scratch of another size (binary_cross_entropy,
            // huber_loss): device memory cannot grow, so compute with the functional op instead;
            // so too when the CPU lacks the float16 / bfloat16 kernel (the functional op upcasts).
            const std::string message = e.what_without_backtrace();
            if (message.find("not resizable") == std::string::npos &&
                !isMissingReducedPrecisionKernel(message)) {
              TORCH_CHECK(false, "inputs ", describe(host), ": ", e.what_without_backtrace());
            }
            s.assign(host.begin(), host.end() - static_cast<std::ptrdiff_t>(fresh_views.size()));
            reseedForReplay(s);
            run(functional, s);
            copy_out = true;
            // The failed kernel may have resized the views it was given: take fresh ones.
            for (size_t i = 0; i < fresh_views.size(); ++i) fresh_geometry[i].restore(fresh_views[i]);
          }
        } else {
          run(functional, s);
        }
        if (!copy_out) return overflow.finish(fresh_views, written);
        // No out= overload (or it could not be used): copy the CPU results into the device outputs.
        size_t k = 0;
        for (const auto& r : s) {
          forEachTensor(r, [&](const at::Tensor& t) {
            if (k < fresh_views.size()) fresh_views[k++].copy_(t);
          });
        }
        overflow.finish(fresh_views, written);
      });

  torch::jit::drop(*stack, nargs);
  for (auto& r : results) stack->push_back(std::move(r));
}

namespace {
void runWithoutFormats(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (executionPolicy().strict) return npuCpuFallback(op, stack);
  genericExecute(op, stack);
}
}  // namespace

void npuBoxedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (isNpuViewOp(op, *stack)) {
    countOp(opCounters(op.schema().operator_name()), OpPath::kGeneric);
    return replayViewOp(op, stack);
  }
  // Host kernels need plain memory: private-format arguments get base-layout stand-ins.
  if (C10_UNLIKELY(anyPrivateFormat()) && stackHasPrivateFormat(op, *stack)) {
    return runOnBaseLayouts(op, stack, &runWithoutFormats);
  }
  runWithoutFormats(op, stack);
}

}  // namespace at_npu::native

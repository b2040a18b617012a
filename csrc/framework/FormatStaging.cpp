// FormatStaging.cpp - per-op format plans for device-op operands, and base-layout stand-ins for the
// boxed fallback's stack.
#include "csrc/framework/FormatStaging.h"

#include <npu/format_layout.h>
#include <npu/opslib.h>

#include <cstring>

#include "csrc/framework/IValueTensors.h"
#include "csrc/framework/OpParamMaker.h"

namespace at_npu::native {
namespace {

namespace nf = npu::formats;

thread_local FormatStaging* tl_active = nullptr;

// What a device op takes natively. Roles map to a format by rank; `convert`: a plain input at that
// position is converted to the native format first (allow_internal_format only), as a real NPU
// runs these ops in their own layouts.
enum class Role { kActivation, kWeight, kMatrix };
struct NativeOperand {
  int index;  // among the op's tensor arguments
  Role role;
  bool convert;
};
struct Rule {
  const char* op;
  bool elementwise;  // any format, when all operands share it (computed over the flat storage)
  std::vector<NativeOperand> native;
};

const std::vector<Rule>& rules() {
  using R = Role;
  static const std::vector<Rule> table = {
      {"aclnnConvolution", false, {{0, R::kActivation, true}, {1, R::kWeight, true}, {3, R::kActivation, false}}},
      {"aclnnConvolutionBackward", false,
       {{0, R::kActivation, true}, {1, R::kActivation, true}, {2, R::kWeight, true},
        {3, R::kActivation, false}, {4, R::kWeight, false}}},
      {"aclnnBatchNorm", false, {{0, R::kActivation, true}, {5, R::kActivation, false}}},
      {"aclnnBatchNormBackward", false,
       {{0, R::kActivation, true}, {1, R::kActivation, true}, {7, R::kActivation, false}}},
      {"aclnnMm", false, {{0, R::kMatrix, false}, {1, R::kMatrix, false}, {2, R::kMatrix, false}}},
      {"aclnnBatchMatMul", false, {{0, R::kMatrix, false}, {1, R::kMatrix, false}, {2, R::kMatrix, false}}},
      {"aclnnAddmm", false,
       {{0, R::kMatrix, false}, {1, R::kMatrix, false}, {2, R::kMatrix, false}, {3, R::kMatrix, false}}},
      {"aclnnBaddbmm", false,
       {{0, R::kMatrix, false}, {1, R::kMatrix, false}, {2, R::kMatrix, false}, {3, R::kMatrix, false}}},
  };
  return table;
}

// Elementwise device ops: their last tensor argument is the output.
bool isElementwise(const char* op) {
  static const char* const names[] = {
      "aclnnAdd", "aclnnSub", "aclnnMul", "aclnnDiv", "aclnnRelu", "aclnnNeg", "aclnnAbs", "aclnnExp",
      "aclnnSqrt", "aclnnSigmoid", "aclnnTanh", "aclnnCast", "aclnnGelu", "aclnnGeluBackward",
      "aclnnSilu", "aclnnSiluBackward", "aclnnSigmoidBackward", "aclnnTanhBackward",
      "aclnnThresholdBackward"};
  for (const char* name : names) {
    if (std::strcmp(op, name) == 0) return true;
  }
  return false;
}

const Rule* ruleFor(const char* op) {
  for (const Rule& r : rules()) {
    if (std::strcmp(op, r.op) == 0) return &r;
  }
  return nullptr;
}

int64_t nativeFormat(Role role, int64_t dim) {
  switch (role) {
    case Role::kActivation: return dim == 4 ? ACL_FORMAT_NC1HWC0 : dim == 5 ? ACL_FORMAT_NDC1HWC0 : -1;
    case Role::kWeight: return dim == 4 ? ACL_FORMAT_FRACTAL_Z : dim == 5 ? ACL_FRACTAL_Z_3D : -1;
    case Role::kMatrix: return dim >= 2 ? ACL_FORMAT_FRACTAL_NZ : -1;
  }
  return -1;
}

bool sameLayout(const NPUStorageDesc& a, const NPUStorageDesc& b) {
  return a.npu_format == b.npu_format && a.c0 == b.c0 && a.base_sizes == b.base_sizes &&
         a.storage_sizes == b.storage_sizes;
}

bool isScalarOperand(const at::Tensor& t) { return t.dim() == 0 && privateDesc(t) == nullptr; }

}  // namespace

bool convertsToNativeFormat(const char* op) {
  return std::strncmp(op, "aclnnConvolution", 16) == 0 || std::strncmp(op, "aclnnBatchNorm", 14) == 0;
}

FormatStaging::FormatStaging(const char* op) : op_(op) {}

FormatStaging::~FormatStaging() {
  if (activated_) tl_active = previous_;
}

FormatStaging* FormatStaging::active() { return tl_active; }

void FormatStaging::add(const at::Tensor& t) { operands_.push_back({t, next_index_++}); }

void FormatStaging::add(const std::optional<at::Tensor>& t) {
  operands_.push_back({t.has_value() ? *t : at::Tensor(), next_index_++});
}

void FormatStaging::add(at::TensorList tensors) {
  for (const at::Tensor& t : tensors) operands_.push_back({t, -1});
}

void FormatStaging::add(const c10::List<std::optional<at::Tensor>>& tensors) {
  for (const std::optional<at::Tensor>& t : tensors.vec()) {
    if (t.has_value()) operands_.push_back({*t, -1});
  }
}

void FormatStaging::planElementwise() {
  // The output is the last tensor argument; every other operand must share its layout or be a
  // scalar, else the op runs on base layouts.
  Operand* out = nullptr;
  for (Operand& o : operands_) {
    if (o.index >= 0 && o.tensor.defined()) out = &o;
  }
  const NPUStorageDesc* lead = nullptr;
  for (const Operand& o : operands_) {
    if (!o.tensor.defined() || isScalarOperand(o.tensor)) continue;
    const NPUStorageDesc* d = privateDesc(o.tensor);
    if (d != nullptr && isWholeTensor(o.tensor, *d)) {
      lead = d;
      break;
    }
  }
  if (lead == nullptr || out == nullptr) return planNative();
  const NPUStorageDesc* out_desc = privateDesc(out->tensor);
  const bool out_leads = out_desc != nullptr && isWholeTensor(out->tensor, *out_desc);
  // Under allow_internal_format a plain operand of the output's shape is converted into its layout
  // (one TransData) rather than the output being converted out of it and back (two).
  const bool align = out_leads && allowInternalFormat();
  if (out_leads) lead = out_desc;
  for (const Operand& o : operands_) {
    if (!o.tensor.defined() || isScalarOperand(o.tensor)) continue;
    const NPUStorageDesc* d = privateDesc(o.tensor);
    if (d != nullptr && isWholeTensor(o.tensor, *d) && sameLayout(*d, *lead)) continue;
    const bool convertible = align && d == nullptr && o.index >= 0 && o.tensor.sizes() == out->tensor.sizes() &&
                             holdsPrivateFormats(o.tensor.scalar_type());
    if (!convertible) return planNative();
  }
  for (Operand& o : operands_) {
    if (!o.tensor.defined() || isScalarOperand(o.tensor)) continue;
    if (privateDesc(o.tensor) != nullptr) {
      o.plan = Plan::kFlat;
      continue;
    }
    if (Operand* seen = find(o.tensor); seen != &o && seen->plan == Plan::kStandIn) {
      o.stand_in = seen->stand_in;  // the same tensor twice (x + x): converted once
      o.plan = Plan::kStandIn;
      continue;
    }
    o.stand_in = emptyWithFormat(o.tensor.sizes(), o.tensor.options(), lead->npu_format, lead->c0);
    transDataToPrivate(o.tensor, o.stand_in.storage(), *privateDesc(o.stand_in));
    o.plan = Plan::kStandIn;
  }
}

void FormatStaging::planNative() {
  const bool allow = allowInternalFormat();
  const Rule* rule = allow ? ruleFor(op_) : nullptr;
  for (Operand& o : operands_) {
    if (!o.tensor.defined()) continue;
    const NativeOperand* native = nullptr;
    if (rule != nullptr) {
      for (const NativeOperand& n : rule->native) {
        if (n.index == o.index) native = &n;
      }
    }
    const int64_t native_format = native != nullptr ? nativeFormat(native->role, o.tensor.dim()) : -1;
    const NPUStorageDesc* d = privateDesc(o.tensor);
    if (d != nullptr) {
      const bool takes_view = native != nullptr && native->role == Role::kMatrix
                                  ? isPermutedWholeTensor(o.tensor, *d)
                                  : isWholeTensor(o.tensor, *d);
      if (d->npu_format == native_format && takes_view) {
        o.plan = Plan::kNative;
      } else {
        o.stand_in = layouts_.get(o.tensor, /*written=*/false);
        o.plan = Plan::kStandIn;
      }
    } else if (native_format >= 0 && native->convert && o.tensor.numel() > 0 &&
               holdsPrivateFormats(o.tensor.scalar_type())) {
      o.stand_in = emptyWithFormat(o.tensor.sizes(), o.tensor.options(), native_format,
                                   nf::DefaultC0(native_format, o.tensor.element_size()));
      transDataToPrivate(o.tensor, o.stand_in.storage(), *privateDesc(o.stand_in));
      o.plan = Plan::kStandIn;
    }
  }
}

void FormatStaging::begin() {
  if (isElementwise(op_)) {
    planElementwise();
  } else {
    planNative();
  }
  previous_ = tl_active;
  tl_active = this;
  activated_ = true;
}

FormatStaging::Operand* FormatStaging::find(const at::Tensor& t) {
  for (Operand& o : operands_) {
    if (o.tensor.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return &o;
  }
  return nullptr;
}

aclTensor* FormatStaging::describe(const at::Tensor& t) {
  Operand* o = find(t);
  aclTensor* d = nullptr;
  if (o == nullptr) {
    // Not an argument seen by add() (a caller-made temporary): stand in if it needs it.
    d = describeTensor(layouts_.get(t, /*written=*/false));
  } else {
    switch (o->plan) {
      case Plan::kPlain: d = describeTensor(t); break;
      case Plan::kFlat: d = describeFlatStorage(t.storage(), *privateDesc(t), t.scalar_type()); break;
      case Plan::kNative: d = describePrivateView(t, *privateDesc(t)); break;
      case Plan::kStandIn: {
        const NPUStorageDesc* s = privateDesc(o->stand_in);
        if (s == nullptr) {
          d = describeTensor(o->stand_in);
        } else if (isElementwise(op_)) {
          d = describeFlatStorage(o->stand_in.storage(), *s, o->stand_in.scalar_type());
        } else {
          d = describePrivateStorage(o->stand_in.storage(), *s);
        }
        break;
      }
    }
  }
  described_.emplace_back(d, t);
  return d;
}

void FormatStaging::noteWrittenOperands() {
  bool any_marked = false;
  for (const auto& [descriptor, tensor] : described_) {
    if (descriptor != nullptr && aclIsOutputTensor(descriptor)) {
      any_marked = true;
      layouts_.markWritten(tensor);
    }
  }
  // An op that does not say what it writes (a custom package): convert every stand-in back.
  if (!any_marked) layouts_.markAllWritten();
  described_.clear();
}

void FormatStaging::end() {
  if (activated_) {
    tl_active = previous_;
    activated_ = false;
  }
  layouts_.commit();
}

// ---- The boxed fallback's door.

namespace {

bool isWritten(const c10::Argument& arg) { return arg.alias_info() != nullptr && arg.alias_info()->isWrite(); }

int aliasedArgument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  if (info == nullptr || !info->isWrite()) return -1;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* a = schema.arguments()[i].alias_info();
    if (a != nullptr && a->isWrite() && a->beforeSets() == info->beforeSets()) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool stackHasPrivateFormat(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      if (privateDesc(v.toTensor()) != nullptr) return true;
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && privateDesc(e.toTensor()) != nullptr) return true;
      }
    }
  }
  return false;
}

void runOnBaseLayouts(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      void (*run)(const c10::OperatorHandle&, torch::jit::Stack*)) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const size_t first = stack->size() - n;
  const std::vector<c10::IValue> originals(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  BaseLayouts layouts;
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (original, stand-in)
  for (size_t i = 0; i < n; ++i) {
    const bool writes = isWritten(schema.arguments()[i]);
    (*stack)[first + i] = mapTensors((*stack)[first + i], [&](const at::Tensor& t) {
      if (privateDesc(t) == nullptr) return t;
      at::Tensor stand_in = layouts.get(t, writes);
      if (writes) written.emplace_back(t, stand_in);
      return stand_in;
    });
  }
  run(op, stack);
  // An out= argument the op resized cannot keep its layout: it becomes plain with the new shape.
  for (auto& [original, stand_in] : written) {
    if (original.sizes() == stand_in.sizes() && original.strides() == stand_in.strides()) continue;
    layouts.forget(original);
    unformatStorage(original.storage());
    original.resize_(stand_in.sizes());
    original.copy_(stand_in);
  }
  const size_t nret = schema.returns().size();
  for (size_t r = 0; r < nret; ++r) {
    const int alias = aliasedArgument(schema, r);
    if (alias >= 0) (*stack)[stack->size() - nret + r] = originals[static_cast<size_t>(alias)];
  }
  layouts.commit();
}

}  // namespace at_npu::native

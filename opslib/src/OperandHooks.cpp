// OperandHooks.cpp - operand records of executors, the overflow rule (inf/nan out of finite
// inputs raises the device's float status) and the hand-off to the data dump.
#include "OperandHooks.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "DataTypes.h"
#include "Descriptors.h"
#include "Error.h"
#include "Executor.h"
#include "OpDump.h"

namespace npu::opslib {
namespace {

// An inf/nan scalar created on this thread since the last executor, and whether the last
// executor created here had one (its operands are recorded right after it is created).
thread_local bool t_nonfinite_scalar = false;
thread_local bool t_executor_nonfinite_scalar = false;

bool IsFloating(aclDataType dtype) {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

// inf and nan are the values whose exponent bits are all ones.
template <typename Bits>
bool RowHasNonFinite(const char* row, int64_t count, int64_t stride, Bits exponent) {
  Bits bits;
  if (stride == static_cast<int64_t>(sizeof(Bits))) {
    Bits any = 0;  // branch-free over contiguous rows
    for (int64_t i = 0; i < count; ++i) {
      std::memcpy(&bits, row + i * sizeof(Bits), sizeof(Bits));
      any |= static_cast<Bits>((bits & exponent) == exponent);
    }
    return any != 0;
  }
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(&bits, row + i * stride, sizeof(Bits));
    if ((bits & exponent) == exponent) return true;
  }
  return false;
}

bool HasNonFinite(const OperandView& view) {
  if (view.is_private()) {
    // Scan the logical values (the padding of the storage holds zeros anyway).
    std::vector<char> logical = view.Gather();
    OperandView plain;
    plain.first = logical.data();
    plain.dtype = view.dtype;
    plain.sizes = {view.numel()};
    plain.strides = {1};
    return HasNonFinite(plain);
  }
  bool found = false;
  const auto scan = [&](auto exponent) {
    view.ForEachRow([&](const char* row, int64_t count, int64_t stride) {
      found = found || RowHasNonFinite(row, count, stride, exponent);
    });
  };
  switch (view.dtype) {
    case ACL_FLOAT: scan(uint32_t{0x7F800000u}); break;
    case ACL_DOUBLE: scan(uint64_t{0x7FF0000000000000ull}); break;
    case ACL_FLOAT16: scan(uint16_t{0x7C00u}); break;
    case ACL_BF16: scan(uint16_t{0x7F80u}); break;
    default: break;  // integers and bools are always finite
  }
  return found;
}

bool Overlaps(const OperandView& a, const OperandView& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto [alo, ahi] = a.Extent();
  const auto [blo, bhi] = b.Extent();
  return alo <= bhi && blo <= ahi;
}

}  // namespace

int64_t ElementBytes(aclDataType dtype) { return ElementSize(dtype); }

OperandView OperandView::Of(const aclTensor& tensor) {
  OperandView view;
  view.dtype = tensor.dtype;
  view.format = tensor.format;
  view.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  view.strides.assign(tensor.strides().begin(), tensor.strides().end());
  if (npu::formats::IsPrivateFormat(tensor.format)) {
    // The descriptor is the whole tensor or a permutation of its dims (checked at creation).
    const std::vector<int64_t> base = npu::formats::BaseDimsOf(view.sizes, view.strides, 0);
    const auto storage = tensor.storage_dims();
    const int64_t c0 = tensor.format == ACL_FORMAT_FRACTAL_NZ ? storage.back() : npu::formats::kBlock;
    view.first = static_cast<const char*>(tensor.data);
    view.storage = std::make_shared<const npu::formats::Layout>(
        npu::formats::PrivateLayout(tensor.format, base, c0));
    view.storage_shape.assign(storage.begin(), storage.end());
    return view;
  }
  view.first = tensor.first_element();
  return view;
}

int64_t OperandView::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<char> OperandView::Gather() const {
  const int64_t element = ElementBytes(dtype);
  if (is_private()) {
    // The whole tensor in row-major order, then this view of it.
    std::vector<int64_t> base(storage->dims.size());
    for (size_t i = 0; i < base.size(); ++i) base[i] = storage->dims[i].size;
    std::vector<char> whole(static_cast<size_t>(numel() * element));
    npu::formats::CopyLayout(*storage, first, npu::formats::ContiguousLayout(base),
                             whole.data(), static_cast<size_t>(element));
    OperandView plain;
    plain.first = whole.data();
    plain.dtype = dtype;
    plain.sizes = sizes;
    plain.strides = strides;
    return plain.Gather();
  }
  std::vector<char> out(static_cast<size_t>(numel() * element));
  char* dst = out.data();
  ForEachRow([&](const char* row, int64_t count, int64_t stride) {
    if (stride == element) {
      std::memcpy(dst, row, static_cast<size_t>(count * element));
      dst += count * element;
      return;
    }
    for (int64_t i = 0; i < count; ++i, dst += element) std::memcpy(dst, row + i * stride, element);
  });
  return out;
}

std::pair<const char*, const char*> OperandView::Extent() const {
  const int64_t element = ElementBytes(dtype);
  if (is_private()) return {first, first + storage->storage_numel * element - 1};
  const char* lo = first;
  const char* hi = first;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t reach = (sizes[d] - 1) * strides[d] * element;
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi + element - 1};
}

bool OperandHooksActive() { return DumpActive() || nrtOverflowDetectionEnabled() != 0; }

void NoteNonFiniteScalar() { t_nonfinite_scalar = true; }

void NoteExecutorCreated() { t_executor_nonfinite_scalar = std::exchange(t_nonfinite_scalar, false); }

void RecordOperands(aclOpExecutor* executor, std::span<const aclTensor* const> inputs,
                    std::span<const aclTensor* const> outputs) {
  const bool finite_scalars = !t_executor_nonfinite_scalar;
  if (executor == nullptr) return;
  auto record = std::make_unique<OperandRecord>();
  for (const aclTensor* t : inputs) {
    if (t != nullptr) record->inputs.push_back(OperandView::Of(*t));
  }
  for (const aclTensor* t : outputs) {
    if (t != nullptr) record->outputs.push_back(OperandView::Of(*t));
  }
  record->finite_scalars = finite_scalars;
  record->dump = ActiveDumpSession(executor->op_name);
  executor->operands = std::move(record);
}

void RecordLaunch(aclOpExecutor& executor, nrtStream_t stream, int32_t device) {
  if (!executor.operands) return;
  executor.operands->stream_id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(stream));
  executor.operands->device = device;
}

KernelWatch::KernelWatch(const aclOpExecutor& executor)
    : executor_(executor), record_(executor.operands.get()) {
  if (record_ == nullptr) return;
  const auto& inputs = record_->inputs;
  const auto& outputs = record_->outputs;
  check_overflow_ = record_->finite_scalars && nrtOverflowDetectionEnabled() != 0 &&
                    std::any_of(outputs.begin(), outputs.end(),
                                [](const OperandView& v) { return IsFloating(v.dtype); });
  if (check_overflow_) {
    // Inputs the kernel overwrites are judged now; the others only if an output turns non-finite.
    input_checked_.assign(inputs.size(), false);
    for (size_t i = 0; i < inputs.size() && inputs_finite_; ++i) {
      const bool overwritten = std::any_of(outputs.begin(), outputs.end(), [&](const OperandView& o) {
        return Overlaps(inputs[i], o);
      });
      if (!overwritten) continue;
      input_checked_[i] = true;
      inputs_finite_ = !HasNonFinite(inputs[i]);
    }
  }
  if (record_->dump && record_->dump->wants_inputs()) {
    input_data_.reserve(inputs.size());
    for (const OperandView& v : inputs) input_data_.push_back(v.Gather());
  }
}

KernelWatch::~KernelWatch() = default;

void KernelWatch::AfterKernel() {
  if (record_ == nullptr) return;
  if (check_overflow_ && inputs_finite_) {
    const auto& outputs = record_->outputs;
    const bool produced = std::any_of(outputs.begin(), outputs.end(), HasNonFinite);
    bool from_finite = produced;
    for (size_t i = 0; from_finite && i < record_->inputs.size(); ++i) {
      if (!input_checked_[i]) from_finite = !HasNonFinite(record_->inputs[i]);
    }
    if (from_finite) nrtRaiseOverflowStatus();
  }
  if (record_->dump) record_->dump->Write(executor_, *record_, input_data_);
}

}  // namespace npu::opslib

extern "C" {

int aclnnOperandHooksActive(void) { return npu::opslib::OperandHooksActive() ? 1 : 0; }

aclnnStatus aclnnSetExecutorOperands(aclOpExecutor* executor, const aclTensor* const* inputs,
                                     uint64_t inputNum, const aclTensor* const* outputs,
                                     uint64_t outputNum) {
  return npu::opslib::GuardApi("aclnnSetExecutorOperands", [&]() -> aclnnStatus {
    if (executor == nullptr) {
      return npu::opslib::Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnSetExecutorOperands: executor is NULL");
    }
    if ((inputs == nullptr && inputNum != 0) || (outputs == nullptr && outputNum != 0)) {
      return npu::opslib::Fail(ACLNN_ERR_PARAM_NULLPTR,
                               "aclnnSetExecutorOperands: a NULL array with a non-zero count");
    }
    npu::opslib::RecordOperands(executor, {inputs, static_cast<size_t>(inputNum)},
                                {outputs, static_cast<size_t>(outputNum)});
    return ACLNN_SUCCESS;
  });
}

}  // extern "C"

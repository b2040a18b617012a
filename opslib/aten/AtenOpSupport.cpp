// AtenOpSupport.cpp - descriptor conversion, kernel boxing and registration for the ATen-backed ops.
#include "AtenOpSupport.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "../src/Descriptors.h"
#include "Float8Dtypes.h"
#include "npu/format_layout.h"

namespace npu::opslib::aten {
namespace {

// The operands staged by the prepare() running on this thread (set by StagingScope).
thread_local std::vector<StagedOperand>* tl_staged = nullptr;

at::Tensor stage(const aclTensor* tensor, bool written) {
  if (tl_staged == nullptr) {
    throw std::invalid_argument(std::string("a ") + npu::formats::FormatName(tensor->format) +
                                " operand can only be read inside an op's prepare()");
  }
  // The descriptor is the whole tensor or a permutation of its dims (validated at creation).
  const std::vector<int64_t> sizes(tensor->sizes().begin(), tensor->sizes().end());
  const std::vector<int64_t> strides(tensor->strides().begin(), tensor->strides().end());
  const std::vector<int64_t> base = npu::formats::BaseDimsOf(sizes, strides, 0);
  const auto storage = tensor->storage_dims();
  const int64_t c0 = tensor->format == ACL_FORMAT_FRACTAL_NZ ? storage.back() : npu::formats::kBlock;
  StagedOperand staged;
  staged.device_layout = npu::formats::PrivateLayout(tensor->format, base, c0);
  staged.device = tensor->data;
  staged.host = at::empty(base, at::TensorOptions().dtype(toScalarType(tensor->dtype)));
  staged.written = written;
  staged.descriptor = tensor;
  at::Tensor host = staged.host.as_strided(sizes, strides);
  tl_staged->push_back(std::move(staged));
  return host;
}

npu::formats::Layout hostLayout(const at::Tensor& host) {
  return npu::formats::ContiguousLayout(host.sizes().vec());
}

}  // namespace

StagingScope::StagingScope(std::vector<StagedOperand>* staged) : previous_(tl_staged) {
  tl_staged = staged;
}

StagingScope::~StagingScope() { tl_staged = previous_; }

void loadStaged(const std::vector<StagedOperand>& staged) {
  for (const StagedOperand& s : staged) {
    npu::formats::CopyLayout(s.device_layout, s.device, hostLayout(s.host), s.host.data_ptr(),
                             s.host.element_size());
  }
}

void storeStaged(const std::vector<StagedOperand>& staged) {
  for (const StagedOperand& s : staged) {
    if (!s.written) continue;
    std::memset(s.device, 0, static_cast<size_t>(s.device_layout.storage_numel) * s.host.element_size());
    npu::formats::CopyLayout(hostLayout(s.host), s.host.data_ptr(), s.device_layout, s.device,
                             s.host.element_size());
  }
}

at::ScalarType toScalarType(aclDataType type) {
  switch (type) {
    case ACL_FLOAT: return at::kFloat;
    case ACL_FLOAT16: return at::kHalf;
    case ACL_BF16: return at::kBFloat16;
    case ACL_DOUBLE: return at::kDouble;
    case ACL_INT8: return at::kChar;
    case ACL_UINT8: return at::kByte;
    case ACL_INT16: return at::kShort;
    case ACL_INT32: return at::kInt;
    case ACL_INT64: return at::kLong;
    case ACL_BOOL: return at::kBool;
    default: break;
  }
  if (const auto holder = float8HolderOf(type)) return *holder;
  throw std::invalid_argument("unsupported data type " + std::to_string(static_cast<int>(type)));
}

// A CPU kernel over a view past its storage (freed, or shrunk under the tensor) would read or write
// outside the allocation: refuse it while the op is prepared, as opslib's own ops do.
static void checkExtent(const aclTensor& tensor, std::span<const int64_t> sizes,
                 std::span<const int64_t> strides) {
  int64_t numel = 1;  // (aclTensor::numel lives inside opslib, not exported to this package)
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return;
  if (tensor.data == nullptr) {
    throw std::invalid_argument("an operand with " + std::to_string(numel) +
                                " elements has no memory (its storage was freed or resized to 0)");
  }
  int64_t lowest = tensor.offset, highest = tensor.offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (strides[i] < 0 ? lowest : highest) += (sizes[i] - 1) * strides[i];
  }
  const auto storage = tensor.storage_dims();
  if (storage.empty()) return;  // private formats were staged before this check
  int64_t storage_elements = 1;
  for (int64_t d : storage) storage_elements *= d;
  if (lowest < 0 || highest >= storage_elements) {
    throw std::invalid_argument("an operand's view reaches elements [" + std::to_string(lowest) +
                                ", " + std::to_string(highest) + "] of a storage of " +
                                std::to_string(storage_elements) + " elements");
  }
}

at::Tensor hostTensor(const aclTensor* tensor) {
  if (tensor == nullptr) return at::Tensor();
  if (npu::formats::IsPrivateFormat(tensor->format)) return stage(tensor, /*written=*/false);
  const at::ScalarType dtype = toScalarType(tensor->dtype);
  const auto sizes = tensor->sizes();
  const auto strides = tensor->strides();
  checkExtent(*tensor, sizes, strides);
  char* base = static_cast<char*>(tensor->data) + tensor->offset * c10::elementSize(dtype);
  return at::from_blob(base, at::IntArrayRef(sizes.data(), sizes.size()),
                       at::IntArrayRef(strides.data(), strides.size()),
                       at::TensorOptions().dtype(dtype));
}

at::Tensor hostTensor(aclTensor* tensor) {
  if (tensor == nullptr) return at::Tensor();
  tensor->written = true;
  if (npu::formats::IsPrivateFormat(tensor->format)) return stage(tensor, /*written=*/true);
  return hostTensor(static_cast<const aclTensor*>(tensor));
}

at::Tensor requiredTensor(const aclTensor* tensor, const char* what) {
  if (tensor == nullptr) throw std::invalid_argument(std::string(what) + " is NULL");
  return hostTensor(tensor);
}

at::Tensor requiredTensor(aclTensor* tensor, const char* what) {
  if (tensor == nullptr) throw std::invalid_argument(std::string(what) + " is NULL");
  return hostTensor(tensor);
}

std::vector<at::Tensor> hostTensors(const aclTensorList* list) {
  if (list == nullptr) throw std::invalid_argument("tensor list is NULL");
  std::vector<at::Tensor> tensors;
  tensors.reserve(list->tensors.size());
  for (const aclTensor* t : list->tensors) tensors.push_back(requiredTensor(t, "tensor list entry"));
  return tensors;
}

c10::List<std::optional<at::Tensor>> hostOptionalTensors(const aclTensorList* list) {
  if (list == nullptr) throw std::invalid_argument("tensor list is NULL");
  c10::List<std::optional<at::Tensor>> tensors;
  for (const aclTensor* t : list->tensors) {
    tensors.push_back(t == nullptr ? std::nullopt : std::optional<at::Tensor>(hostTensor(t)));
  }
  return tensors;
}

at::Scalar hostScalar(const aclScalar* scalar) {
  if (scalar == nullptr) throw std::invalid_argument("scalar is NULL");
  if (scalar->dtype == ACL_BOOL) return at::Scalar(scalar->value.b);
  switch (scalar->dtype) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_DOUBLE:
      return at::Scalar(scalar->value.f64);
    default:
      break;
  }
  return at::Scalar(scalar->value.i64);
}

std::vector<int64_t> intArray(const aclIntArray* array) {
  return array == nullptr ? std::vector<int64_t>() : array->values;
}

std::string describeTensors(const std::vector<at::Tensor>& tensors) {
  std::ostringstream os;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) os << ", ";
    if (tensors[i].defined()) {
      os << c10::toString(tensors[i].scalar_type()) << tensors[i].sizes();
    } else {
      os << "None";
    }
  }
  return os.str();
}

std::string kernelErrorText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) {
    return c10_error->what_without_backtrace();
  }
  return e.what();
}

namespace {

struct BoxedKernel {
  std::vector<at::Tensor> inputs;
  std::function<void()> kernel;
  std::vector<StagedOperand> staged;
};

int runBoxedKernel(void* data, void* /*workspace*/, uint64_t /*workspace_size*/) {
  auto* boxed = static_cast<BoxedKernel*>(data);
  try {
    // Below autograd: operands prepared under the caller's InferenceMode are inference tensors,
    // which the worker thread (outside that mode) could not write otherwise.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    loadStaged(boxed->staged);
    boxed->kernel();
    storeStaged(boxed->staged);
  } catch (const std::exception& e) {
    // The runtime reports "<op> failed: <this>": name the inputs like the generic executor does.
    throw std::runtime_error("inputs (" + describeTensors(boxed->inputs) + "): " +
                             kernelErrorText(e));
  }
  return 0;
}

// Descriptors of the defined tensors (views of the same device memory), for the operand hooks.
// A staged operand is described by its caller's private-format descriptor, so that hooks read
// the device storage (the staging tensor is filled only when the kernel starts).
struct Descriptors {
  std::vector<const aclTensor*> list;
  std::vector<const aclTensor*> owned;
  Descriptors(const std::vector<at::Tensor>& tensors, const std::vector<StagedOperand>& staged) {
    for (const at::Tensor& t : tensors) {
      if (!t.defined()) continue;
      const auto it = std::find_if(staged.begin(), staged.end(), [&](const StagedOperand& s) {
        return s.descriptor != nullptr && s.host.is_alias_of(t);
      });
      if (it != staged.end()) {
        list.push_back(it->descriptor);
        continue;
      }
      const int64_t storage = 0;
      owned.push_back(aclCreateTensor(t.sizes().data(), t.dim(), AclDataTypeOf(t.scalar_type()),
                                      t.strides().data(), 0, ACL_FORMAT_ND, &storage, 0,
                                      t.data_ptr()));
      list.push_back(owned.back());
    }
  }
  ~Descriptors() {
    for (const aclTensor* t : owned) aclDestroyTensor(t);
  }
};

}  // namespace

namespace {
// Kernels over this many elements in all (inputs and outputs) or fewer cost less than the hand-off
// to the stream's worker: an accuracy metric's argmax over a batch's logits, a loss's mean.
constexpr int64_t kShortRunElements = 4096;

bool isShortRun(const Prepared& prepared, const std::vector<StagedOperand>& staged) {
  if (!staged.empty()) return false;
  int64_t elements = 0;
  for (const auto* list : {&prepared.inputs, &prepared.outputs}) {
    for (const at::Tensor& t : *list) elements += t.defined() ? t.numel() : 0;
  }
  return elements <= kShortRunElements;
}
}  // namespace

aclnnStatus wrapKernel(const char* name, Prepared prepared, aclOpExecutor** executor,
                       std::vector<StagedOperand> staged) {
  const bool short_run = isShortRun(prepared, staged);
  auto boxed = std::make_unique<BoxedKernel>(
      BoxedKernel{std::move(prepared.inputs), std::move(prepared.kernel), std::move(staged)});
  *executor = aclnnCreateExecutor(name, &runBoxedKernel, boxed.get(),
                                  [](void* data) { delete static_cast<BoxedKernel*>(data); });
  if (*executor == nullptr) return ACLNN_ERR_INNER;  // recent error set by aclnnCreateExecutor
  if (short_run) aclnnSetExecutorShortRun(*executor, 1);
  if (aclnnOperandHooksActive()) {
    const Descriptors inputs(boxed->inputs, boxed->staged);
    const Descriptors outputs(prepared.outputs, boxed->staged);
    aclnnSetExecutorOperands(*executor, inputs.list.data(), inputs.list.size(), outputs.list.data(),
                             outputs.list.size());
  }
  boxed.release();
  return ACLNN_SUCCESS;
}

BuiltinOp::BuiltinOp(const char* name, void* get_workspace_size, void* launch, const char* param_kinds,
                     const char* param_names) {
  if (aclnnRegisterBuiltinOp(name, get_workspace_size, launch, param_kinds, param_names) != ACLNN_SUCCESS) {
    std::fprintf(stderr, "[WARNING] NPU_OPSLIB: %s\n", aclnnGetRecentErrMsg());
  }
}

}  // namespace npu::opslib::aten

// Referenced by the adapter so that the linker keeps this package (its ops register while it
// loads; nothing else names a symbol of it).
extern "C" NOP_API int npu_opslib_aten_package_loaded(void) { return 1; }

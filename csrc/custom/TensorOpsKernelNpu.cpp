// TensorOpsKernelNpu.cpp - npu_dtype_cast, npu_format_cast, npu_broadcast, npu_confusion_transpose,
// npu_one_hot, npu_stride_add: layout and type ops composed of ATen ops (they also serve as Meta kernels).
#include <ATen/ops/_to_copy.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clone.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"
#include "csrc/custom/HiFloat8Tensors.h"
#include "csrc/custom/NpuDtypeCodes.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"

namespace at_npu::native {

// dtype and input_dtype are torch dtypes or torch_npu's codes (torch_npu.float16, ...: NpuDtypeCodes.h).
// input_dtype says what the bytes of self hold; it must have self's element size, and reinterprets them.
// torch_npu.hifloat8 is held in uint8 tensors: casting to it encodes a floating self, and input_dtype
// torch_npu.hifloat8 decodes a uint8 self.
at::Tensor npu_dtype_cast(const at::Tensor& self, int64_t dtype, std::optional<int64_t> input_dtype) {
  constexpr const char* kOp = "npu_dtype_cast";
  at::Tensor src = self;
  if (input_dtype.has_value() && *input_dtype == dtype_codes::kHiFloat8Code) {
    TORCH_CHECK_TYPE(self.scalar_type() == at::kByte, kOp, ": input_dtype torch_npu.hifloat8 reads hifloat8 codes ",
                     "from a uint8 tensor, got ", self.scalar_type());
    src = hifloat8::decode(self);
  } else if (input_dtype.has_value()) {
    const at::ScalarType from = dtype_codes::scalarTypeOfCode(kOp, "input_dtype", *input_dtype, "read");
    TORCH_CHECK_VALUE(c10::elementSize(from) == self.element_size(), kOp, ": input_dtype ", from,
                      " takes ", c10::elementSize(from), " bytes an element, but self is ", self.scalar_type(),
                      " with ", self.element_size(), "; input_dtype reinterprets self's bytes, so the sizes must match");
    if (from != self.scalar_type()) src = self.view(from);
  }
  if (dtype == dtype_codes::kHiFloat8Code) {
    TORCH_CHECK_TYPE(at::isFloatingType(src.scalar_type()), kOp, ": casting to torch_npu.hifloat8 takes a floating ",
                     "tensor, got ", src.scalar_type());
    return hifloat8::encode(src);
  }
  const at::ScalarType to = dtype_codes::scalarTypeOfCode(kOp, "dtype", dtype, "cast to");
  // Always a new tensor, even for the same dtype: the schema promises no aliasing.
  return at::_to_copy(src, to);
}

// grad (of dtype grad_dtype, the forward's dtype) back to self's dtype. A forward that reinterpreted self's bytes
// (input_dtype other than self's dtype) has no gradient.
at::Tensor npu_dtype_cast_backward(const at::Tensor& grad, at::ScalarType dtype, std::optional<int64_t> grad_dtype,
                                   std::optional<int64_t> input_dtype) {
  constexpr const char* kOp = "npu_dtype_cast_backward";
  if (grad_dtype.has_value()) {
    const at::ScalarType holds = dtype_codes::scalarTypeOfCode(kOp, "grad_dtype", *grad_dtype, "read");
    TORCH_CHECK_VALUE(holds == grad.scalar_type(), kOp, ": grad_dtype says grad holds ", holds, ", but grad is ",
                      grad.scalar_type());
  }
  if (input_dtype.has_value()) {
    const at::ScalarType from = dtype_codes::scalarTypeOfCode(kOp, "input_dtype", *input_dtype, "read");
    TORCH_CHECK_VALUE(from == dtype, kOp, ": the forward read the input's ", dtype, " bytes as ", from,
                      "; a reinterpretation of bytes has no gradient. Cast with ATen ops to train through it");
  }
  return at::_to_copy(grad, dtype);
}

at::Tensor npu_format_cast(const at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype,
                           std::optional<int64_t> input_dtype) {
  TORCH_CHECK_VALUE(!input_dtype.has_value() || *input_dtype == static_cast<int64_t>(self.scalar_type()),
                    "npu_format_cast: input_dtype reinterprets packed 4-bit data, which the software NPU ",
                    "does not have; leave it None (got ", *input_dtype, " for a ", self.scalar_type(), " tensor)");
  if (self.device().type() != c10::DeviceType::PrivateUse1) {
    // Meta / fake tensors (torch.compile): the same checks, the logical result.
    resolveFormat(self, acl_format, customize_dtype);
    return at::clone(self, at::MemoryFormat::Contiguous);
  }
  return formatCast(self, acl_format, customize_dtype);
}

at::Tensor npu_broadcast(const at::Tensor& self, at::IntArrayRef size) {
  return at::clone(self.expand(size), at::MemoryFormat::Contiguous);
}

at::Tensor npu_confusion_transpose(const at::Tensor& self, at::IntArrayRef perm, at::IntArrayRef shape,
                                   bool transpose_first) {
  at::Tensor out = transpose_first ? self.permute(perm).reshape(shape) : self.reshape(shape).permute(perm);
  return custom::fresh(out.contiguous(), self);
}

at::Tensor npu_one_hot(const at::Tensor& self, int64_t num_classes, int64_t depth,
                       const at::Scalar& on_value, const at::Scalar& off_value) {
  // torch_npu's naming: `num_classes` is the axis the new dimension goes to, `depth` its size.
  TORCH_CHECK_VALUE(depth >= 1, "npu_one_hot: depth must be >= 1, got ", depth);
  TORCH_CHECK_VALUE(!at::isFloatingType(self.scalar_type()) && !at::isComplexType(self.scalar_type()),
                    "npu_one_hot: expects integer class indices, got ", self.scalar_type());
  const int64_t axis = c10::maybe_wrap_dim(num_classes, self.dim() + 1);
  auto opts = self.options().dtype(at::kFloat);
  at::Tensor classes = at::arange(depth, self.options().dtype(self.scalar_type()));
  std::vector<int64_t> shape(self.dim() + 1, 1);
  shape[axis] = depth;
  at::Tensor hit = at::eq(self.unsqueeze(axis), classes.view(shape));
  return at::where(hit, at::full({}, on_value, opts), at::full({}, off_value, opts));
}

at::Tensor npu_stride_add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& offset1,
                          const at::Scalar& offset2, const at::Scalar& c1_len) {
  // Channel blocks of 16 (the C0 of the NC1HWC0 layout): out = self[:, o1*16 : (o1+len)*16] +
  // other[:, o2*16 : (o2+len)*16].
  constexpr int64_t kC0 = 16;
  TORCH_CHECK_VALUE(self.dim() >= 2 && other.dim() >= 2, "npu_stride_add: inputs need a channel dimension (dim 1)");
  const int64_t o1 = offset1.toLong(), o2 = offset2.toLong(), len = c1_len.toLong();
  TORCH_CHECK_VALUE(o1 >= 0 && o2 >= 0 && len >= 1 && (o1 + len) * kC0 <= self.size(1) &&
                        (o2 + len) * kC0 <= other.size(1),
                    "npu_stride_add: channel blocks out of range: offset1=", o1, " offset2=", o2, " c1_len=", len,
                    " (16 channels per block) for inputs with ", self.size(1), " and ", other.size(1), " channels");
  return self.narrow(1, o1 * kC0, len * kC0) + other.narrow(1, o2 * kC0, len * kC0);
}

}  // namespace at_npu::native

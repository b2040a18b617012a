// MatmulKernelNpu.cpp - mm, bmm, addmm, baddbmm on device ops (matmul, linear and @ decompose into
// these). Shape errors are raised at the call, with PyTorch's wording.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int8_t kKeepPrecision = 0;  // cubeMathType: compute in the tensors' own precision

bool isMatmulFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

// One dtype throughout, or (as NPU cube units take them) float16 / bfloat16 operands mixed with float32
// ones: those accumulate in float32 and round once into the output's dtype.
bool matmulOnDevice(TensorRefs tensors, const at::Tensor& out) {
  if (!deviceOpsSupport(tensors)) return false;
  bool same = true, floats = isMatmulFloat(out.scalar_type());
  for (const at::Tensor& t : tensors) {
    if (t.device() != out.device()) return false;
    same = same && t.scalar_type() == out.scalar_type();
    floats = floats && isMatmulFloat(t.scalar_type());
  }
  if (!same) return floats;
  return at::isFloatingType(out.scalar_type()) || out.scalar_type() == at::kLong ||
         out.scalar_type() == at::kInt;
}

void checkMm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
              a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

void checkBmm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ",
              a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
}

// Under allow_internal_format a product with a FRACTAL_NZ operand is FRACTAL_NZ too, as on an NPU
// (a fresh output only: a caller's out= tensor keeps its layout).
template <typename... Inputs>
void adoptMatrixFormat(const at::Tensor& out, const Inputs&... inputs) {
  if (C10_LIKELY(!allowInternalFormat() || !anyPrivateFormat()) || privateDesc(out) != nullptr || out.dim() < 2) {
    return;
  }
  for (const at::Tensor* t : {&inputs...}) {
    const NPUStorageDesc* d = privateDesc(*t);
    if (d != nullptr && d->npu_format == ACL_FORMAT_FRACTAL_NZ) return adoptFormat(out, ACL_FORMAT_FRACTAL_NZ);
  }
}

}  // namespace

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (!matmulOnDevice({self, mat2}, out)) {
    runGeneric("aten::mm", "out", self, mat2, out);
    return out;
  }
  checkMm(self, mat2);
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  adoptMatrixFormat(out, self, mat2);
  EXEC_NPU_CMD(aclnnMm, self, mat2, out, kKeepPrecision);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (!matmulOnDevice({self, mat2}, out)) {
    runGeneric("aten::bmm", "out", self, mat2, out);
    return out;
  }
  checkBmm(self, mat2);
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
  adoptMatrixFormat(out, self, mat2);
  EXEC_NPU_CMD(aclnnBatchMatMul, self, mat2, out, kKeepPrecision);
  return out;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (!matmulOnDevice({self, mat1, mat2}, out) || beta.isComplex() || alpha.isComplex()) {
    runGeneric("aten::addmm", "out", self, mat1, mat2, beta, alpha, out);
    return out;
  }
  checkMm(mat1, mat2);
  const std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  at::infer_size(self.sizes(), shape);  // self must broadcast to the product's shape
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  adoptMatrixFormat(out, self, mat1, mat2);
  // The builder form of EXEC_NPU_CMD: the same launch, with the attributes named.
  OpCommand()
      .Name("aclnnAddmm")
      .Input(self)
      .Input(mat1)
      .Input(mat2)
      .Attr("beta", beta)
      .Attr("alpha", alpha)
      .Output(out)
      .Attr("cubeMathType", kKeepPrecision)
      .Run();
  return out;
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  if (!matmulOnDevice({self, batch1, batch2}, out) || beta.isComplex() || alpha.isComplex()) {
    runGeneric("aten::baddbmm", "out", self, batch1, batch2, beta, alpha, out);
    return out;
  }
  checkBmm(batch1, batch2);
  const std::vector<int64_t> shape{batch1.size(0), batch1.size(1), batch2.size(2)};
  at::infer_size(self.sizes(), shape);
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  adoptMatrixFormat(out, self, batch1, batch2);
  EXEC_NPU_CMD(aclnnBaddbmm, self, batch1, batch2, beta, alpha, out, kKeepPrecision);
  return out;
}

}  // namespace at_npu::native

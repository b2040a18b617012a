// TransDataOp.cpp - aclnnTransData: moves a tensor between two layouts of the same logical shape
// (plain strided views and the private formats of npu/format_layout.h), zeroing a private dst's
// padding.
#include <algorithm>
#include <cstring>
#include <vector>

#include "DataTypes.h"
#include "Error.h"
#include "Executor.h"
#include "OpChecks.h"
#include "OpRegistry.h"
#include "ThreadPool.h"
#include "npu/format_layout.h"

namespace npu::opslib {
namespace {

namespace nf = npu::formats;

// Rows of the copy handed to one thread: large enough that splitting pays off.
constexpr int64_t kMinElementsPerChunk = 1 << 16;

nf::Layout LayoutOf(const aclTensor& t) {
  const std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  if (nf::IsPrivateFormat(t.format)) {
    const auto storage = t.storage_dims();
    const int64_t c0 = t.format == ACL_FORMAT_FRACTAL_NZ ? storage.back() : nf::kBlock;
    return nf::PrivateLayout(t.format, sizes, c0);
  }
  return nf::StridedLayout(sizes, std::vector<int64_t>(t.strides().begin(), t.strides().end()),
                           t.offset);
}

aclnnStatus TransDataGetWorkspaceSize(const aclTensor* src, const aclTensor* dst,
                                      uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnTransData";
  const NamedTensor named_src{"src", src};
  const NamedTensor named_dst{"dst", dst};
  if (aclnnStatus s = CheckNotNull(op, {named_src, named_dst}, workspace_size, executor)) return s;
  if (src->dtype != dst->dtype) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": src dtype ", DataTypeName(src->dtype),
                    " differs from dst dtype ", DataTypeName(dst->dtype),
                    "; TransData changes the layout only (use aclnnCast for dtypes)");
  }
  if (!IsSupportedType(src->dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": dtype ", DataTypeName(src->dtype), " is not supported");
  }
  if (!std::equal(src->sizes().begin(), src->sizes().end(), dst->sizes().begin(), dst->sizes().end())) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": src shape ", ShapeString(src->sizes()),
                    " differs from dst shape ", ShapeString(dst->sizes()),
                    "; both describe the same logical tensor");
  }
  for (const NamedTensor& t : {named_src, named_dst}) {
    if (!nf::IsPrivateFormat(t.tensor->format)) continue;
    int64_t step = 1;
    for (size_t i = t.tensor->ndim; i-- > 0;) {
      if (t.tensor->sizes()[i] != 1 && t.tensor->strides()[i] != step) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", t.name, " is a permuted view of a ",
                        nf::FormatName(t.tensor->format), " tensor; TransData moves whole tensors");
      }
      step *= t.tensor->sizes()[i];
    }
  }
  int32_t device = -1;
  if (aclnnStatus s = CheckMemory(op, {named_dst, named_src}, &device)) return s;

  struct Job {
    nf::Layout src_layout, dst_layout;
    const void* src;
    void* dst;
    size_t itemsize;
    int64_t dst_storage_bytes;  // private dst: zeroed first, so padding lanes read 0
    int64_t rows, numel;
  };
  Job job{LayoutOf(*src), LayoutOf(*dst), src->data, dst->data,
          static_cast<size_t>(ElementSize(src->dtype)), 0, 1, src->numel()};
  if (nf::IsPrivateFormat(dst->format)) {
    job.dst_storage_bytes = job.dst_layout.storage_numel * static_cast<int64_t>(job.itemsize);
  }
  job.rows = src->sizes().size() >= 2 ? src->sizes()[0] : 1;
  *executor = NewExecutor(op, device, [job = std::move(job)](void*, uint64_t) {
    if (job.numel == 0) return;
    if (job.dst_storage_bytes > 0) std::memset(job.dst, 0, static_cast<size_t>(job.dst_storage_bytes));
    const int64_t per_row = job.rows > 0 ? job.numel / job.rows : 0;
    const int64_t rows_per_chunk = per_row > 0 ? std::max<int64_t>(1, kMinElementsPerChunk / per_row) : 1;
    ParallelFor(job.rows, rows_per_chunk, [&job](int64_t begin, int64_t end) {
      nf::CopyLayout(job.src_layout, job.src, job.dst_layout, job.dst, job.itemsize, begin, end);
    });
  });
  *workspace_size = 0;
  dst->written = true;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

extern "C" {

aclnnStatus aclnnTransDataGetWorkspaceSize(const aclTensor* src, aclTensor* dst,
                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return npu::opslib::GuardApi("aclnnTransDataGetWorkspaceSize", [&] {
    return npu::opslib::TransDataGetWorkspaceSize(src, dst, workspaceSize, executor);
  });
}

}  // extern "C"

NPU_OPSLIB_DEFINE_OP(TransData, "src, dst");

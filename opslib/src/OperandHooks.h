// OperandHooks.h - what an executor remembers about its tensors while a data dump or overflow
// detection watches the device ops, and the checks its launch runs around the kernel.
#ifndef NPU_OPSLIB_SRC_OPERAND_HOOKS_H_
#define NPU_OPSLIB_SRC_OPERAND_HOOKS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "npu/format_layout.h"
#include "npu/opslib.h"

namespace npu::opslib {

class DumpSession;

int64_t ElementBytes(aclDataType dtype);  // 0 for unknown types

// A strided view of device memory; sizes and strides count elements. A tensor in a private
// format (NC1HWC0, FRACTAL_NZ...) is seen through its logical values: `storage` maps the whole
// tensor into the padded storage at `first`, and sizes / strides place the view in that whole
// (row-major) tensor.
struct OperandView {
  const char* first = nullptr;  // element (0, ..., 0); a private format's storage base
  aclDataType dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> storage_shape;  // a private format's padded storage, else empty
  std::shared_ptr<const npu::formats::Layout> storage;  // a private format's layout, else null

  static OperandView Of(const aclTensor& tensor);
  int64_t numel() const;
  bool is_private() const { return storage != nullptr; }
  // Calls fn(row, count, stride_bytes) for each innermost row, in row-major order (plain views).
  template <typename Fn>
  void ForEachRow(Fn&& fn) const;
  // The logical elements, contiguous and row-major.
  std::vector<char> Gather() const;
  // [lowest, highest] byte of device memory the view touches.
  std::pair<const char*, const char*> Extent() const;
};

template <typename Fn>
void OperandView::ForEachRow(Fn&& fn) const {
  const int64_t element = ElementBytes(dtype);
  const size_t ndim = sizes.size();
  if (numel() == 0) return;
  if (ndim == 0) {
    fn(first, int64_t{1}, element);
    return;
  }
  const int64_t row = sizes[ndim - 1];
  const int64_t row_stride = strides[ndim - 1] * element;
  std::vector<int64_t> index(ndim, 0);
  while (true) {
    const char* p = first;
    for (size_t d = 0; d + 1 < ndim; ++d) p += index[d] * strides[d] * element;
    fn(p, row, row_stride);
    size_t d = ndim - 1;
    while (d > 0) {
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (ndim == 1) return;
  }
}

// Recorded by XxxGetWorkspaceSize (only while hooks are active, so the normal launch path stays
// as it was); the launch adds where it runs.
struct OperandRecord {
  std::vector<OperandView> inputs;
  std::vector<OperandView> outputs;
  bool finite_scalars = true;                 // no inf/nan scalar argument
  std::shared_ptr<DumpSession> dump;          // the data dump this op belongs to, if any
  int32_t device = -1;                        // filled in by the launch
  uint64_t stream_id = 0;
};

// True while a data dump runs or overflow detection is on: ops then record their operands.
bool OperandHooksActive();

// Attaches the operands to `executor`, the last one created on this thread (NULL entries are
// skipped).
void RecordOperands(aclOpExecutor* executor, std::span<const aclTensor* const> inputs,
                    std::span<const aclTensor* const> outputs);

// aclCreateScalar calls this for an inf/nan value: such an op may legitimately produce inf. Every
// new executor takes the note over from the scalars created before it.
void NoteNonFiniteScalar();
void NoteExecutorCreated();

// Fills in the stream of a launch.
void RecordLaunch(aclOpExecutor& executor, nrtStream_t stream, int32_t device);

// Runs on the stream's worker around the kernel of an executor with recorded operands:
// the input half of a dump and the inputs' finiteness before, the rest after.
class KernelWatch {
 public:
  explicit KernelWatch(const aclOpExecutor& executor);
  ~KernelWatch();
  KernelWatch(const KernelWatch&) = delete;
  KernelWatch& operator=(const KernelWatch&) = delete;
  void AfterKernel();

 private:
  const aclOpExecutor& executor_;
  const OperandRecord* record_;
  bool check_overflow_ = false;
  std::vector<bool> input_checked_;  // inputs that outputs overwrite are checked before the kernel
  bool inputs_finite_ = true;
  std::vector<std::vector<char>> input_data_;  // for the dump
};

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_OPERAND_HOOKS_H_

// OpDump.h - the ACL-style data dump of named device ops: one file per launched op holding its
// input and / or output tensors, written by the stream's worker when the op runs.
#ifndef NPU_OPSLIB_SRC_OP_DUMP_H_
#define NPU_OPSLIB_SRC_OP_DUMP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "OperandHooks.h"
#include "npu/opslib.h"

namespace npu::opslib {

class DumpSession {
 public:
  // `directory` is the session's own directory ({dump_path}/{YYYYmmddHHMMSS}); `ops` filters by
  // op type ("Add") or launch name ("aclnnAdd"), empty for every op.
  DumpSession(std::string directory, aclnnDumpMode mode, std::vector<std::string> ops);

  const std::string& directory() const { return directory_; }
  bool Wants(const std::string& op_name) const;
  bool wants_inputs() const { return mode_ != ACLNN_DUMP_OUTPUT; }
  bool wants_outputs() const { return mode_ != ACLNN_DUMP_INPUT; }

  // On the worker, after the kernel: writes {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}
  // under {directory}/{device}/0/0, through a temporary name so a partial file never looks
  // complete. A failure is kept (the first one) and ends the session's writing.
  void Write(const aclOpExecutor& executor, const OperandRecord& record,
             const std::vector<std::vector<char>>& inputs);

  uint64_t files() const { return files_.load(); }
  uint64_t bytes() const { return bytes_.load(); }
  std::optional<std::string> error() const;

 private:
  const std::string directory_;
  const aclnnDumpMode mode_;
  const std::vector<std::string> ops_;
  std::atomic<uint64_t> next_task_{0};
  std::atomic<uint64_t> files_{0};
  std::atomic<uint64_t> bytes_{0};
  mutable std::mutex mu_;
  std::optional<std::string> error_;
};

bool DumpActive();  // cheap: one atomic load
// The running session if it wants `op_name`, else nullptr.
std::shared_ptr<DumpSession> ActiveDumpSession(const std::string& op_name);

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_OP_DUMP_H_

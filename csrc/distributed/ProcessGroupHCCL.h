// ProcessGroupHCCL.h - the c10d backend "hccl" for npu tensors. Collectives run on PyTorch's Gloo
// over zero-copy CPU views of device memory, on the device's communication stream, ordered after
// the work already queued on the caller's stream; each is checked across ranks before data moves
// and fails with a DistBackendError that names the group, the collective, its sequence number and
// the ranks that did not arrive.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "csrc/distributed/CollectiveCheck.h"
#include "csrc/distributed/GroupState.h"
#include "csrc/distributed/HostCollectives.h"
#include "csrc/distributed/WorkHCCL.h"

namespace c10d_npu {

class ProcessGroupHCCL : public c10d::Backend {
 public:
  // `data_gloo` and `meta_gloo` are two ProcessGroupGloo over the same ranks (made by the Python
  // creator, which owns Gloo's device and rendezvous options).
  ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> data_gloo,
                   c10::intrusive_ptr<c10d::Backend> meta_gloo, std::vector<int64_t> global_ranks);
  ~ProcessGroupHCCL() override;

  const std::string getBackendName() const override { return "hccl"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  c10d::ErrorType getError() override;
  void shutdown() override;  // flushes issued work, then closes
  void abort() override;     // closes at once
  // reinit_process_group: every rank of the group swaps in new Gloo groups (made over `store`, a
  // fresh prefix of the group's store); collectives count again from #1 and an earlier failure is
  // forgotten. Work already queued finishes (or fails) on the old transport. Not to be called while
  // another thread issues collectives on the group.
  void rebuild(const c10::intrusive_ptr<c10d::Store>& store, c10::intrusive_ptr<c10d::Backend> data_gloo,
               c10::intrusive_ptr<c10d::Backend> meta_gloo);

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  // get_hccl_comm_name / _set_hccl_comm_name: the name torch_npu's communication-fused ops
  // (npu_mm_all_reduce_base, ...) are given to find this group by (csrc/distributed/CommNames.cpp).
  // Set once per group: by _set_hccl_comm_name, or to a default name by the first query.
  std::string hcclCommName();
  void setHcclCommName(const std::string& name);

 private:
  std::mutex comm_name_mutex_;
  std::string comm_name_;  // guarded by comm_name_mutex_

  // One collective as issued: its fingerprint, the device tensors it touches, and the host code
  // that moves the data (over views taken when it is issued).
  struct Collective {
    Collective(CollectiveKind kind, c10d::OpType type, std::chrono::milliseconds timeout,
               std::vector<at::Tensor> tensors = {}, std::vector<at::Tensor> outputs = {})
        : op_type(type), tensors(std::move(tensors)), outputs(std::move(outputs)), timeout(timeout) {
      fingerprint.kind = kind;
    }
    Fingerprint fingerprint;
    c10d::OpType op_type = c10d::OpType::UNKNOWN;
    std::vector<at::Tensor> tensors;
    std::vector<at::Tensor> outputs;
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
    std::optional<c10::Device> device;  // for collectives without tensors (barrier)
    bool host_wait = false;
    std::function<void(host::Context&)> run;
    // Operands in a private storage format (NC1HWC0, FRACTAL_NZ...) travel in their base format,
    // as on HCCL: view() takes a base-format copy on the caller's stream (TransData); launch()
    // writes the copies of outputs back into their format on the communication stream.
    std::vector<std::pair<at::Tensor, at::Tensor>> staged;  // (operand, its base-format copy)
    at::Tensor view(const at::Tensor& t);
    std::vector<at::Tensor> views(const std::vector<at::Tensor>& ts);
    bool writesBack() const;                    // some output is a staged copy
    void writeBack(const c10::Stream& comm) const;  // queues the TransData of each such output
  };

  c10::intrusive_ptr<c10d::Work> launch(Collective c);
  c10::intrusive_ptr<c10d::Work> launchP2P(bool is_send, std::vector<at::Tensor>& tensors, int peer, int tag);
  // The npu device this process uses in the group; raises a clear error for CPU tensors, tensors
  // on several devices or on another device than the group's.
  c10::Device groupDevice(const char* collective, const std::vector<at::Tensor>& tensors,
                          std::optional<c10::Device> hint = std::nullopt);
  std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds requested) const;
  std::string groupText() const;  // "process group 0 (default_pg)"
  void checkRoot(const char* collective, int64_t root) const;
  void checkPeer(const char* collective, int peer) const;

  std::shared_ptr<GroupState> state_;
  std::chrono::milliseconds timeout_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2p_seq_{0};
  std::optional<c10::Device> device_;
  std::mutex mutex_;         // device_, coalescing state
  std::mutex launch_mutex_;  // a collective's number, fingerprint exchange and task are issued together
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkHCCL>> coalesced_;
};

}  // namespace c10d_npu

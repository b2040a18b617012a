// PointToPoint.cpp - send / recv and coalesced blocks (batch_isend_irecv) of ProcessGroupHCCL.
#include <c10/core/Event.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/distributed/ProcessGroupHCCL.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/HostView.h"
#include "csrc/framework/StorageDesc.h"

namespace c10d_npu {

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return launchP2P(true, tensors, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return launchP2P(false, tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK_VALUE(false, "hccl recv needs a source rank: recv(tensor, src=None) (from any rank) is not supported; "
                    "pass src=");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::launchP2P(bool is_send, std::vector<at::Tensor>& tensors, int peer,
                                                           int tag) {
  const char* name = is_send ? "send" : "recv";
  TORCH_CHECK_VALUE(tensors.size() == 1, "hccl ", name, " takes one tensor, got ", tensors.size());
  at::Tensor tensor = tensors[0];
  c10::Device device = groupDevice(name, tensors);
  checkPeer(name, peer);
  if (const at_npu::native::NPUStorageDesc* desc = at_npu::native::privateDesc(tensor)) {
    // The wire carries logical elements. A send takes a base-format copy (TransData on the caller's
    // stream); a recv completes off the stream, where no TransData can follow it.
    TORCH_CHECK_VALUE(is_send, "hccl recv: the tensor is stored in the private format ",
                      at_npu::native::formatName(desc->npu_format), "; receive into a base-format tensor "
                      "(torch.empty(shape, dtype=..., device='npu')) and convert it afterwards with "
                      "torch_npu.npu_format_cast(t, ", desc->npu_format, ")");
    at::Tensor copy = at::empty(tensor.sizes(), tensor.options());
    copy.copy_(tensor);
    tensor = copy;
  }
  std::string failure = state_->failure();
  if (!failure.empty()) {
    C10_THROW_ERROR(DistBackendError, std::string("hccl ") + name + " cannot run: " + groupText() +
                                          " is unusable after an earlier failure. Rebuild it on every rank "
                                          "(torch_npu.distributed.reinit_process_group(group)), or destroy it "
                                          "(destroy_process_group) and create a new one.\n  Earlier failure: " + failure);
  }
  std::unique_lock<std::mutex> issuing(launch_mutex_);
  uint64_t seq = ++p2p_seq_;
  std::string what = std::string(c10_npu::kCollectiveTaskPrefix) + name + " #" + std::to_string(seq) +
                     (is_send ? " to rank " : " from rank ") + std::to_string(state_->globalRank(peer)) + " in " +
                     groupText();
  Fingerprint header;
  header.kind = is_send ? CollectiveKind::kSend : CollectiveKind::kRecv;
  header.describeTensor(tensor);
  auto deadline = std::chrono::steady_clock::now() + effectiveTimeout(c10d::kUnsetTimeout);

  auto work = c10::make_intrusive<WorkHCCL>(rank_, is_send ? c10d::OpType::SEND : c10d::OpType::RECV, seq, what,
                                            device, std::vector<at::Tensor>{tensor}, state_->env().blocking_wait,
                                            /*host_wait=*/false);
  work->completeFutureWhenFinished();
  c10_npu::NPUStream comm = c10_npu::getCommunicationNPUStream(device.index());
  c10::Event ready(c10::DeviceType::PrivateUse1);
  ready.record(c10_npu::getCurrentNPUStream(device.index()).unwrap());
  ready.block(comm.unwrap());

  // Posting happens in stream order (the data to send is ready, the buffer to fill is free); the
  // transfer then proceeds off the stream, holding the tensor until it is done.
  at::Tensor view = at_npu::native::hostView(tensor);
  // The task holds the tensor and the Work (which Python sees too) through KeptAlive: a stream
  // worker must not drop them (DeferredRelease.h).
  at_npu::native::KeptAlive<at::Tensor> held(tensor);
  at_npu::native::KeptAlive<c10::intrusive_ptr<WorkHCCL>> kept_work(work);
  at_npu::native::launchDeviceTask(comm, what, [state = state_, work = kept_work, held, view, peer, tag, is_send, deadline,
                                                header, what, name = std::string(name), global_peer = state_->globalRank(peer)] {
    P2PEngine::Op op;
    op.is_send = is_send;
    op.peer = peer;
    op.tag = tag;
    op.header = header.encode(0);
    op.deadline = deadline;
    op.keepalive = held;
    bool staged = !view.is_contiguous();
    op.payload = staged ? (is_send ? view.contiguous() : at::empty(view.sizes(), view.options())) : view;
    if (staged && !is_send) op.on_received = [view, staging = op.payload] { view.copy_(staging); };
    op.check = [header, global_peer, tag](const std::vector<int64_t>& sent) {
      Fingerprint theirs = Fingerprint::decode(sent.data(), 0);
      if (theirs.dtype == header.dtype && theirs.numel == header.numel) return std::string();
      return "rank " + std::to_string(global_peer) + " sent " + theirs.tensorText() + " (tag " + std::to_string(tag) +
             ") but this rank's recv expects " + header.tensorText();
    };
    op.finished = [state, work, what, deadline, global_peer](const std::string& error) {
      std::string text = error;
      std::string transport = " [transport: " + error.substr(0, error.find('\n')) + "]";
      if (text.empty()) {
      } else if (text.find("Timed out") != std::string::npos || std::chrono::steady_clock::now() >= deadline) {
        text = "rank " + std::to_string(global_peer) + " did not post the matching operation in time (timed out); "
               "every send needs a recv of the same size and tag on the peer" + transport;
      } else if (text.find("Connection closed") != std::string::npos ||
                 text.find("Connection reset") != std::string::npos || text.find("pair closure") != std::string::npos) {
        text = "lost the connection to rank " + std::to_string(global_peer) + " (its process exited or crashed)" +
               transport;
      }
      if (!text.empty()) state->fail(what + " failed: " + text);  // before the Work reports it
      (*work)->markFinished(text);
    };
    state->transport().p2p().submit(std::move(op));
  });
  issuing.unlock();
  std::lock_guard<std::mutex> lock(mutex_);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

void ProcessGroupHCCL::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  coalescing_ = true;
  coalesced_.clear();
}

namespace {

// The Work of a coalesced block (batch_isend_irecv): done when every operation in it is done.
class CoalescedWorkHCCL : public c10d::Work {
 public:
  explicit CoalescedWorkHCCL(std::vector<c10::intrusive_ptr<WorkHCCL>> works, int rank)
      : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {}
  bool isCompleted() override {
    return std::all_of(works_.begin(), works_.end(), [](auto& w) { return w->isCompleted(); });
  }
  bool isSuccess() const override {
    return std::all_of(works_.begin(), works_.end(), [](auto& w) { return w->isSuccess(); });
  }
  std::exception_ptr exception() const override {
    for (auto& w : works_) {
      if (auto e = w->exception()) return e;
    }
    return nullptr;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) w->wait(timeout);
    return true;
  }
  void synchronize() override {
    for (auto& w : works_) w->synchronize();
  }

 private:
  std::vector<c10::intrusive_ptr<WorkHCCL>> works_;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::endCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  coalescing_ = false;
  return c10::make_intrusive<CoalescedWorkHCCL>(std::move(coalesced_), rank_);
}

}  // namespace c10d_npu

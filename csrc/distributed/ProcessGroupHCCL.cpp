// ProcessGroupHCCL.cpp - argument checks, fingerprints and stream handling of every collective;
// the data movement itself is in HostCollectives.cpp, point-to-point in P2PEngine.cpp.
#include "csrc/distributed/ProcessGroupHCCL.h"

#include <c10/core/Event.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/core/NPUStream.h"
#include "csrc/distributed/StreamOrder.h"
#include "csrc/framework/DeferredRelease.h"
#include "csrc/framework/DeviceTask.h"

namespace c10d_npu {
namespace {

void checkSameDtype(const char* collective, const std::vector<at::Tensor>& tensors, at::ScalarType dtype) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == dtype, "hccl ", collective, ": all tensors must have the same dtype, got ",
                     c10::toString(t.scalar_type()), " and ", c10::toString(dtype));
  }
}

}  // namespace

ProcessGroupHCCL::ProcessGroupHCCL(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend> data_gloo,
                                   c10::intrusive_ptr<c10d::Backend> meta_gloo, std::vector<int64_t> global_ranks)
    : c10d::Backend(rank, size),
      state_(std::make_shared<GroupState>(store, rank, size, std::move(global_ranks), std::move(data_gloo),
                                          std::move(meta_gloo))),
      timeout_(timeout) {}

ProcessGroupHCCL::~ProcessGroupHCCL() { abort(); }

void ProcessGroupHCCL::shutdown() {
  // destroy_process_group: the work already issued runs first (as NCCL's shutdown flushes it), each
  // bounded by its timeout; point-to-point operations still queued on the communication stream must
  // reach the transport before it closes.
  std::optional<c10::Device> device;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    device = device_;
  }
  if (device) {
    try {
      c10_npu::getCommunicationNPUStream(device->index()).synchronize();
    } catch (const std::exception&) {
      // A failed collective is reported by its Work and at the next sync; the group still closes.
    }
  }
  state_->transport().p2p().waitIdle();  // transfers the stream handed over, until they land
  abort();
}

void ProcessGroupHCCL::abort() {
  // Queued collectives keep the group's state (and Gloo) alive until they finish; operations that
  // reach the closed transport fail at once.
  state_->transport().p2p().close();
}

void ProcessGroupHCCL::rebuild(const c10::intrusive_ptr<c10d::Store>& store, c10::intrusive_ptr<c10d::Backend> data_gloo,
                               c10::intrusive_ptr<c10d::Backend> meta_gloo) {
  std::lock_guard<std::mutex> issuing(launch_mutex_);
  std::lock_guard<std::mutex> guard(mutex_);
  auto fresh = std::make_shared<GroupState>(store, rank_, size_, state_->globalRanks(), std::move(data_gloo),
                                            std::move(meta_gloo));
  state_->transport().p2p().close();
  state_ = std::move(fresh);
  seq_ = 0;
  p2p_seq_ = 0;
  coalescing_ = false;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupHCCL::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("hccl", timeout_);
  options->group_name = getGroupUid();
  options->group_desc = getGroupDesc();
  for (int64_t r : state_->globalRanks()) options->global_ranks_in_group.push_back(static_cast<uint64_t>(r));
  return options;
}

c10d::ErrorType ProcessGroupHCCL::getError() {
  std::string failure = state_->failure();
  if (failure.empty()) return c10d::ErrorType::SUCCESS;
  return failure.find("timed out") != std::string::npos ? c10d::ErrorType::TIMEOUT : c10d::ErrorType::COMM_ERROR;
}

std::string ProcessGroupHCCL::groupText() const {
  std::string text = "process group " + (getGroupUid().empty() ? std::string("?") : getGroupUid());
  std::string desc = getGroupDesc();
  if (!state_->globalRanks().empty()) {
    desc += desc.empty() ? "" : ", ";
    desc += "global ranks [";
    for (size_t i = 0; i < state_->globalRanks().size(); ++i) {
      desc += (i ? ", " : "") + std::to_string(state_->globalRanks()[i]);
    }
    desc += "]";
  }
  return desc.empty() ? text : text + " (" + desc + ")";
}

std::chrono::milliseconds ProcessGroupHCCL::effectiveTimeout(std::chrono::milliseconds requested) const {
  std::chrono::milliseconds timeout = requested == c10d::kUnsetTimeout ? timeout_ : requested;
  if (state_->env().exec_timeout) timeout = std::min(timeout, *state_->env().exec_timeout);
  return timeout;
}

c10::Device ProcessGroupHCCL::groupDevice(const char* collective, const std::vector<at::Tensor>& tensors,
                                          std::optional<c10::Device> hint) {
  std::optional<c10::Device> device = hint;
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_VALUE(t.defined(), "hccl ", collective, ": got an undefined tensor");
    TORCH_CHECK_VALUE(t.device().is_privateuseone(), "hccl ", collective, ": expected npu tensors, got a tensor on ",
                      t.device(), ". hccl runs collectives on npu tensors: move it with .npu() (or "
                      ".to(f'npu:{local_rank}')), or create the group with backend='cpu:gloo,npu:hccl' so that CPU "
                      "tensors run on Gloo");
    TORCH_CHECK_VALUE(t.layout() == c10::kStrided, "hccl ", collective, ": ", t.layout(),
                      " tensors are not supported; pass dense tensors (e.g. .to_dense())");
    TORCH_CHECK_VALUE(!device || *device == t.device(), "hccl ", collective,
                      ": all tensors must be on the same device, got ", *device, " and ", t.device());
    device = t.device();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!device_) {
    device_ = getBoundDeviceId();
    if (!device_) device_ = device ? *device : c10::Device(c10::DeviceType::PrivateUse1, c10_npu::current_device());
  }
  if (!device) return *device_;
  TORCH_CHECK_VALUE(*device == *device_, "hccl ", collective, ": the tensors are on ", *device, " but ", groupText(),
                    " runs on ", *device_, " in this process (its device_id, or the device of its first "
                    "collective). Each process drives one device: call torch.npu.set_device(local_rank) before "
                    "init_process_group, or pass device_id=torch.device('npu', local_rank)");
  return *device;
}

void ProcessGroupHCCL::checkRoot(const char* collective, int64_t root) const {
  TORCH_CHECK_VALUE(root >= 0 && root < size_, "hccl ", collective, ": root rank ", root, " is not in ", groupText(),
                    ", which has ", size_, " ranks");
}

void ProcessGroupHCCL::checkPeer(const char* collective, int peer) const {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size_, "hccl ", collective, ": peer rank ", peer, " is not in ", groupText(),
                    ", which has ", size_, " ranks");
  TORCH_CHECK_VALUE(peer != rank_, "hccl ", collective, ": rank ", rank_, " cannot ", collective, " to itself");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::launch(Collective c) {
  const char* name = collectiveName(c.fingerprint.kind);
  c10::Device device = groupDevice(name, c.tensors, c.device);
  std::string failure = state_->failure();
  if (!failure.empty()) {
    C10_THROW_ERROR(DistBackendError, std::string("hccl ") + name + " cannot run: " + groupText() +
                                          " is unusable after an earlier failure. Rebuild it on every rank "
                                          "(torch_npu.distributed.reinit_process_group(group)), or destroy it "
                                          "(destroy_process_group) and create a new one.\n  Earlier failure: " + failure);
  }
  Deadline deadline = Deadline::after(effectiveTimeout(c.timeout));
  // Threads issuing on one group (DDP's autograd thread and the main thread) keep each collective's
  // number, fingerprint exchange and stream task in one order.
  std::unique_lock<std::mutex> issuing(launch_mutex_);
  uint64_t seq = ++seq_;
  c.fingerprint.seq = static_cast<int64_t>(seq);
  std::string what = std::string(c10_npu::kCollectiveTaskPrefix) + name + " #" + std::to_string(seq) + " in " + groupText();

  // The fingerprints travel now (they are known on the host); the data once the stream gets there.
  auto exchange = std::make_shared<GlooTransport::Exchange>(
      state_->transport().startExchange(c.fingerprint.encode(size_), size_, deadline));
  c10_npu::NPUStream comm = c10_npu::getCommunicationNPUStream(device.index());
  c10_npu::NPUStream caller = c10_npu::getCurrentNPUStream(device.index());
  uint64_t caller_tasks = stream_order::taskCount(caller);
  if (!stream_order::ordered(caller, comm, caller_tasks)) {
    c10::Event ready(c10::DeviceType::PrivateUse1);
    ready.record(caller.unwrap());
    ready.block(comm.unwrap());
    stream_order::noteEvent(caller, comm, caller_tasks);
  }
  // The caller may free its tensors right away: their blocks are reused only after the
  // communication stream has passed this collective.
  for (const at::Tensor& t : c.tensors) {
    if (t.storage().data_ptr()) c10_npu::NPUCachingAllocator::recordStream(t.storage().data_ptr(), comm);
  }
  for (const auto& staged : c.staged) {
    if (staged.second.storage().data_ptr()) {
      c10_npu::NPUCachingAllocator::recordStream(staged.second.storage().data_ptr(), comm);
    }
  }
  auto work = c10::make_intrusive<WorkHCCL>(rank_, c.op_type, seq, what, device, c.outputs,
                                            state_->env().blocking_wait, c.host_wait);
  bool writes_back = c.writesBack();
  // Tasks hold the Work (and with it the outputs Python sees) through KeptAlive: a stream worker must
  // not drop the last reference to it (DeferredRelease.h).
  at_npu::native::KeptAlive<c10::intrusive_ptr<WorkHCCL>> kept_work(work);
  at_npu::native::launchDeviceTask(
      comm, what,
      [state = state_, work = kept_work, exchange, run = std::move(c.run), deadline, fp = c.fingerprint, seq, name = std::string(name),
       what, writes_back] {
        // Collectives queued behind a failed one do not wait for peers that will not come.
        std::string error = state->failure().empty() ? "" : "not run: an earlier collective of the group failed";
        try {
          if (error.empty()) {
            state->agree(*exchange, fp, seq, name);
            host::Context ctx{state->transport(), deadline, state->rank(), state->size()};
            run(ctx);
          }
        } catch (const std::exception& e) {
          error = state->explain(e, seq, name, deadline);
        }
        // The group is marked failed before the Work reports it, so that a caller who saw the
        // failure finds the group unusable at its next collective.
        if (!error.empty()) state->fail(what + " failed: " + error);
        // With outputs to write back, the Work finishes after the write-back (below) unless it failed.
        if (!error.empty() || !writes_back) (*work)->markFinished(error);
        if (!error.empty()) throw std::runtime_error(error);
      });
  if (writes_back) {
    std::string error;  // the Work carries a failed write-back instead of never finishing
    try {
      c.writeBack(comm.unwrap());
    } catch (const std::exception& e) {
      error = std::string("could not convert the result back into the tensor's storage format: ") + e.what();
    }
    at_npu::native::launchDeviceTask(comm, what, [work = kept_work, error] { (*work)->markFinished(error); });
  }
  issuing.unlock();
  work->completeFutureOn(comm.unwrap());
  std::lock_guard<std::mutex> lock(mutex_);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "hccl all_reduce takes one tensor per process, got ", tensors.size());
  groupDevice("all_reduce", tensors);
  const at::Tensor& t = tensors[0];
  host::checkReducible("all_reduce", t.scalar_type(), opts.reduceOp);
  Collective c(CollectiveKind::kAllreduce, c10d::OpType::ALLREDUCE, opts.timeout, tensors, tensors);
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensor(t);
  c.run = [view = c.view(t), red = host::Reduction::from(opts.reduceOp)](host::Context& ctx) {
    host::allreduce(ctx, {view}, red);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "hccl all_reduce_coalesced needs at least one tensor");
  groupDevice("all_reduce_coalesced", tensors);
  checkSameDtype("all_reduce_coalesced", tensors, tensors[0].scalar_type());
  host::checkReducible("all_reduce_coalesced", tensors[0].scalar_type(), opts.reduceOp);
  Collective c(CollectiveKind::kAllreduceCoalesced, c10d::OpType::ALLREDUCE_COALESCED, opts.timeout, tensors, tensors);
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensors(tensors);
  c.fingerprint.shape = {c.fingerprint.numel};
  c.run = [vs = c.views(tensors), red = host::Reduction::from(opts.reduceOp)](host::Context& ctx) {
    host::allreduce(ctx, vs, red);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "hccl broadcast takes one tensor per process, got ", tensors.size());
  groupDevice("broadcast", tensors);
  checkRoot("broadcast", opts.rootRank);
  Collective c(CollectiveKind::kBroadcast, c10d::OpType::BROADCAST, opts.timeout, tensors, tensors);
  c.fingerprint.root = opts.rootRank;
  c.fingerprint.describeTensor(tensors[0]);
  c.run = [view = c.view(tensors[0]), root = static_cast<int>(opts.rootRank)](host::Context& ctx) {
    host::broadcast(ctx, view, root);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "hccl reduce takes one tensor per process, got ", tensors.size());
  groupDevice("reduce", tensors);
  checkRoot("reduce", opts.rootRank);
  host::checkReducible("reduce", tensors[0].scalar_type(), opts.reduceOp);
  Collective c(CollectiveKind::kReduce, c10d::OpType::REDUCE, opts.timeout, tensors, tensors);
  c.fingerprint.root = opts.rootRank;
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensor(tensors[0]);
  c.run = [view = c.view(tensors[0]), red = host::Reduction::from(opts.reduceOp),
           root = static_cast<int>(opts.rootRank)](host::Context& ctx) { host::reduce(ctx, view, red, root); };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1, "hccl all_gather takes one input tensor and one "
                    "output list per process");
  std::vector<at::Tensor>& outs = outputs[0];
  TORCH_CHECK_VALUE(static_cast<int>(outs.size()) == size_, "hccl all_gather: the output list has ", outs.size(),
                    " tensors; it needs one per rank of ", groupText(), " (", size_, ")");
  std::vector<at::Tensor> all = outs;
  all.push_back(inputs[0]);
  groupDevice("all_gather", all);
  checkSameDtype("all_gather", outs, inputs[0].scalar_type());
  Collective c(CollectiveKind::kAllgather, c10d::OpType::ALLGATHER, opts.timeout, all, outs);
  c.fingerprint.describeTensor(inputs[0]);
  c.fingerprint.send_counts.assign(size_, inputs[0].numel());
  for (const at::Tensor& o : outs) c.fingerprint.recv_counts.push_back(o.numel());
  TORCH_CHECK_VALUE(outs[rank_].numel() == inputs[0].numel(), "hccl all_gather: output tensor ", rank_, " has ",
                    outs[rank_].numel(), " elements but this rank's input has ", inputs[0].numel());
  c.run = [outs_v = c.views(outs), in_v = c.view(inputs[0])](host::Context& ctx) {
    host::allgather(ctx, outs_v, in_v);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  groupDevice("all_gather_into_tensor", {output, input});
  checkSameDtype("all_gather_into_tensor", {output}, input.scalar_type());
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "hccl all_gather_into_tensor: the output has ",
                    output.numel(), " elements; it needs the group size (", size_, ") times the input's (",
                    input.numel(), ")");
  Collective c(CollectiveKind::kAllgatherIntoTensor, c10d::OpType::_ALLGATHER_BASE, opts.timeout,
               {output, input}, {output});
  c.fingerprint.describeTensor(input);
  c.run = [out_v = c.view(output), in_v = c.view(input)](host::Context& ctx) {
    host::allgatherIntoTensor(ctx, out_v, in_v);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "hccl all_gather_into_tensor_coalesced: ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  groupDevice("all_gather_into_tensor_coalesced", all);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_ &&
                      outputs[i].scalar_type() == inputs[i].scalar_type(),
                      "hccl all_gather_into_tensor_coalesced: output ", i, " must have the input's dtype and ",
                      size_, " times its elements");
  }
  Collective c(CollectiveKind::kAllgatherCoalesced, c10d::OpType::COALESCED, opts.timeout, all, outputs);
  c.fingerprint.describeTensors(inputs);
  c.run = [outs_v = c.views(outputs), ins_v = c.views(inputs)](host::Context& ctx) {
    for (size_t i = 0; i < ins_v.size(); ++i) host::allgatherIntoTensor(ctx, outs_v[i], ins_v[i]);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(static_cast<int>(output_lists.size()) == size_, "hccl all_gather_coalesced: needs one output "
                    "list per rank (", size_, "), got ", output_lists.size());
  std::vector<at::Tensor> all = inputs;
  for (const auto& list : output_lists) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(), "hccl all_gather_coalesced: each output list needs one tensor "
                      "per input (", inputs.size(), "), got ", list.size());
    all.insert(all.end(), list.begin(), list.end());
  }
  groupDevice("all_gather_coalesced", all);
  Collective c(CollectiveKind::kAllgatherCoalesced, c10d::OpType::ALLGATHER_COALESCED, opts.timeout, all);
  c.fingerprint.describeTensors(inputs);
  for (const auto& list : output_lists) c.outputs.insert(c.outputs.end(), list.begin(), list.end());
  std::vector<std::vector<at::Tensor>> per_input(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& list : output_lists) per_input[i].push_back(c.view(list[i]));
  }
  c.run = [per_input, ins_v = c.views(inputs)](host::Context& ctx) {
    for (size_t i = 0; i < ins_v.size(); ++i) host::allgather(ctx, per_input[i], ins_v[i]);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  TORCH_CHECK_VALUE(inputs.size() == 1, "hccl gather takes one input tensor per process");
  checkRoot("gather", opts.rootRank);
  bool is_root = rank_ == opts.rootRank;
  std::vector<at::Tensor> outs;
  if (is_root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "hccl gather: the root "
                      "needs a gather_list with one tensor per rank (", size_, ")");
    outs = outputs[0];
    checkSameDtype("gather", outs, inputs[0].scalar_type());
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "hccl gather: only the root rank passes a gather_list");
  }
  std::vector<at::Tensor> all = outs;
  all.push_back(inputs[0]);
  groupDevice("gather", all);
  Collective c(CollectiveKind::kGather, c10d::OpType::GATHER, opts.timeout, all, outs);
  c.fingerprint.root = opts.rootRank;
  c.fingerprint.describeTensor(inputs[0]);
  c.fingerprint.send_counts.assign(size_, 0);
  c.fingerprint.send_counts[opts.rootRank] = inputs[0].numel();
  c.fingerprint.recv_counts.assign(size_, 0);
  for (size_t r = 0; r < outs.size(); ++r) c.fingerprint.recv_counts[r] = outs[r].numel();
  c.run = [outs_v = c.views(outs), in_v = c.view(inputs[0]), root = static_cast<int>(opts.rootRank)](host::Context& ctx) {
    host::gather(ctx, outs_v, in_v, root);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1, "hccl scatter takes one output tensor per process");
  checkRoot("scatter", opts.rootRank);
  bool is_root = rank_ == opts.rootRank;
  std::vector<at::Tensor> ins;
  if (is_root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "hccl scatter: the root "
                      "needs a scatter_list with one tensor per rank (", size_, ")");
    ins = inputs[0];
    checkSameDtype("scatter", ins, outputs[0].scalar_type());
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "hccl scatter: only the root rank passes a scatter_list");
  }
  std::vector<at::Tensor> all = ins;
  all.push_back(outputs[0]);
  groupDevice("scatter", all);
  Collective c(CollectiveKind::kScatter, c10d::OpType::SCATTER, opts.timeout, all, outputs);
  c.fingerprint.root = opts.rootRank;
  c.fingerprint.describeTensor(outputs[0]);
  c.fingerprint.send_counts.assign(size_, 0);
  for (size_t r = 0; r < ins.size(); ++r) c.fingerprint.send_counts[r] = ins[r].numel();
  c.fingerprint.recv_counts.assign(size_, 0);
  c.fingerprint.recv_counts[opts.rootRank] = outputs[0].numel();
  c.run = [out_v = c.view(outputs[0]), ins_v = c.views(ins), root = static_cast<int>(opts.rootRank)](host::Context& ctx) {
    host::scatter(ctx, out_v, ins_v, root);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1, "hccl reduce_scatter takes one output tensor and "
                    "one input list per process");
  std::vector<at::Tensor>& ins = inputs[0];
  TORCH_CHECK_VALUE(static_cast<int>(ins.size()) == size_, "hccl reduce_scatter: the input list has ", ins.size(),
                    " tensors; it needs one per rank (", size_, ")");
  const at::Tensor& out = outputs[0];
  for (const at::Tensor& in : ins) {
    TORCH_CHECK_VALUE(in.numel() == out.numel(), "hccl reduce_scatter: every input must have the output's number "
                      "of elements (", out.numel(), "), got ", in.numel());
  }
  std::vector<at::Tensor> all = ins;
  all.push_back(out);
  groupDevice("reduce_scatter", all);
  checkSameDtype("reduce_scatter", ins, out.scalar_type());
  host::checkReducible("reduce_scatter", out.scalar_type(), opts.reduceOp);
  Collective c(CollectiveKind::kReduceScatter, c10d::OpType::REDUCE_SCATTER, opts.timeout, all, outputs);
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensor(out);
  c.fingerprint.send_counts.assign(size_, out.numel());
  c.fingerprint.recv_counts.assign(size_, out.numel());
  c.run = [out_v = c.view(out), ins_v = c.views(ins), red = host::Reduction::from(opts.reduceOp)](host::Context& ctx) {
    host::reduceScatter(ctx, out_v, ins_v, red);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  groupDevice("reduce_scatter_tensor", {output, input});
  checkSameDtype("reduce_scatter_tensor", {input}, output.scalar_type());
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "hccl reduce_scatter_tensor: the input has ",
                    input.numel(), " elements; it needs the group size (", size_, ") times the output's (",
                    output.numel(), ")");
  host::checkReducible("reduce_scatter_tensor", output.scalar_type(), opts.reduceOp);
  Collective c(CollectiveKind::kReduceScatterTensor, c10d::OpType::_REDUCE_SCATTER_BASE, opts.timeout,
               {output, input}, {output});
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensor(input);
  c.run = [out_v = c.view(output), in_v = c.view(input), red = host::Reduction::from(opts.reduceOp)](
              host::Context& ctx) { host::reduceScatterTensor(ctx, out_v, in_v, red); };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "hccl reduce_scatter_tensor_coalesced: ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  groupDevice("reduce_scatter_tensor_coalesced", all);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_ &&
                      outputs[i].scalar_type() == inputs[i].scalar_type(),
                      "hccl reduce_scatter_tensor_coalesced: input ", i, " must have the output's dtype and ",
                      size_, " times its elements");
    host::checkReducible("reduce_scatter_tensor_coalesced", inputs[i].scalar_type(), opts.reduceOp);
  }
  Collective c(CollectiveKind::kReduceScatterCoalesced, c10d::OpType::COALESCED, opts.timeout, all, outputs);
  c.fingerprint.reduce_op = opts.reduceOp.op_;
  c.fingerprint.describeTensors(inputs);
  c.run = [outs_v = c.views(outputs), ins_v = c.views(inputs), red = host::Reduction::from(opts.reduceOp)](
              host::Context& ctx) {
    for (size_t i = 0; i < ins_v.size(); ++i) host::reduceScatterTensor(ctx, outs_v[i], ins_v[i], red);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_split_sizes,
                                                               std::vector<int64_t>& input_split_sizes,
                                                               const c10d::AllToAllOptions& opts) {
  groupDevice("all_to_all_single", {output, input});
  checkSameDtype("all_to_all_single", {input}, output.scalar_type());
  // Splits are rows of dim 0; the wire counts elements.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* which) {
    int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    int64_t row_numel = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> out;
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "hccl all_to_all_single: the ", which, " has ", rows,
                        " rows, which do not split evenly over ", size_, " ranks; pass ", which, "_split_sizes");
      out.assign(size_, rows / size_ * row_numel);
    } else {
      TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size_, "hccl all_to_all_single: ", which,
                        "_split_sizes has ", splits.size(), " entries; it needs one per rank (", size_, ")");
      int64_t sum = 0;
      for (int64_t s : splits) {
        TORCH_CHECK_VALUE(s >= 0, "hccl all_to_all_single: negative split size ", s);
        sum += s;
        out.push_back(s * row_numel);
      }
      TORCH_CHECK_VALUE(sum == rows, "hccl all_to_all_single: ", which, "_split_sizes add up to ", sum, " but the ",
                        which, " has ", rows, " rows");
    }
    return out;
  };
  std::vector<int64_t> out_counts = counts(output, output_split_sizes, "output");
  std::vector<int64_t> in_counts = counts(input, input_split_sizes, "input");
  Collective c(CollectiveKind::kAlltoallSingle, c10d::OpType::ALLTOALL_BASE, opts.timeout, {output, input}, {output});
  c.fingerprint.describeTensor(input);
  c.fingerprint.send_counts = in_counts;
  c.fingerprint.recv_counts = out_counts;
  c.run = [out_v = c.view(output), in_v = c.view(input), out_counts, in_counts](host::Context& ctx) {
    host::alltoallSingle(ctx, out_v, in_v, out_counts, in_counts);
  };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
                    "hccl all_to_all: needs one input and one output tensor per rank (", size_, "), got ",
                    inputs.size(), " and ", outputs.size());
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  groupDevice("all_to_all", all);
  checkSameDtype("all_to_all", all, inputs[0].scalar_type());
  Collective c(CollectiveKind::kAlltoall, c10d::OpType::ALLTOALL, opts.timeout, all, outputs);
  c.fingerprint.describeTensor(inputs[0]);
  for (const at::Tensor& t : inputs) c.fingerprint.send_counts.push_back(t.numel());
  for (const at::Tensor& t : outputs) c.fingerprint.recv_counts.push_back(t.numel());
  c.run = [outs_v = c.views(outputs), ins_v = c.views(inputs)](host::Context& ctx) { host::alltoall(ctx, outs_v, ins_v); };
  return launch(std::move(c));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  std::optional<c10::Device> device;
  if (opts.device && opts.device->is_privateuseone()) device = *opts.device;
  if (!opts.device_ids.empty()) device = c10::Device(c10::DeviceType::PrivateUse1, opts.device_ids[0]);
  if (device && !device->has_index()) device = c10::Device(c10::DeviceType::PrivateUse1, c10_npu::current_device());
  Collective c(CollectiveKind::kBarrier, c10d::OpType::BARRIER, opts.timeout);
  c.device = device;
  c.host_wait = true;
  c.run = [](host::Context& ctx) { host::barrier(ctx); };
  return launch(std::move(c));
}

}  // namespace c10d_npu

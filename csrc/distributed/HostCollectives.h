// HostCollectives.h - each collective as host code over CPU views of device memory, run on Gloo
// inside a communication-stream task. Non-contiguous tensors are staged; AVG and PREMUL_SUM (which
// Gloo rejects) are emulated; bool reductions follow NCCL (SUM = any, PRODUCT = all); data movement
// goes as bytes, so every dtype can be broadcast, gathered, scattered and exchanged.
#pragma once

#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "csrc/distributed/GlooTransport.h"

namespace c10d_npu::host {

struct Context {
  GlooTransport& gloo;
  const Deadline& deadline;
  int rank;
  int size;
};

// A reduce op as the collective will apply it. PREMUL_SUM's tensor factor is read when the
// collective runs (it may still be computed on a stream when the collective is issued).
struct Reduction {
  c10d::ReduceOp::RedOpType op = c10d::ReduceOp::SUM;
  double factor = 1.0;
  at::Tensor factor_view;

  static Reduction from(const c10d::ReduceOp& op);  // on the issuing thread
  double premulFactor() const;
};

// Raises (on the issuing thread) if `op` cannot reduce `dtype`, saying what to use instead.
void checkReducible(const char* collective, at::ScalarType dtype, const c10d::ReduceOp& op);

void allreduce(Context& c, const std::vector<at::Tensor>& views, const Reduction& red);
void broadcast(Context& c, const at::Tensor& view, int root);
void reduce(Context& c, const at::Tensor& view, const Reduction& red, int root);
void allgather(Context& c, const std::vector<at::Tensor>& outs, const at::Tensor& in);
void allgatherIntoTensor(Context& c, const at::Tensor& out, const at::Tensor& in);
void gather(Context& c, const std::vector<at::Tensor>& outs, const at::Tensor& in, int root);
void scatter(Context& c, const at::Tensor& out, const std::vector<at::Tensor>& ins, int root);
void reduceScatter(Context& c, const at::Tensor& out, const std::vector<at::Tensor>& ins, const Reduction& red);
void reduceScatterTensor(Context& c, const at::Tensor& out, const at::Tensor& in, const Reduction& red);
// Splits are in elements, one per group rank.
void alltoall(Context& c, const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& ins);
void alltoallSingle(Context& c, const at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_counts,
                    const std::vector<int64_t>& in_counts);
void barrier(Context& c);

}  // namespace c10d_npu::host

// CollectiveCheck.h - what each rank passes to a collective (its fingerprint), exchanged before the
// data moves, so that ranks calling different collectives or passing mismatched tensors get a clear
// error instead of a hang, garbage or a crash inside the transport.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace c10d_npu {

enum class CollectiveKind : int64_t {
  kAllreduce = 1,
  kAllreduceCoalesced,
  kBroadcast,
  kReduce,
  kAllgather,
  kAllgatherIntoTensor,
  kAllgatherCoalesced,
  kGather,
  kScatter,
  kReduceScatter,
  kReduceScatterTensor,
  kReduceScatterCoalesced,
  kAlltoall,
  kAlltoallSingle,
  kBarrier,
  kSend,
  kRecv,
};

// The torch.distributed name of the collective ("all_reduce", "reduce_scatter_tensor", ...).
const char* collectiveName(CollectiveKind kind);

struct Fingerprint {
  CollectiveKind kind = CollectiveKind::kBarrier;
  int64_t seq = 0;
  int64_t reduce_op = -1;  // c10d::ReduceOp::RedOpType, or -1
  int64_t dtype = -1;      // c10::ScalarType, or -1
  int64_t root = -1;       // group rank of the root, or -1
  int64_t numel = 0;       // elements of this rank's (first) tensor
  int64_t layout = 0;      // hash of the per-tensor sizes for coalesced collectives
  std::vector<int64_t> shape;
  // Elements this rank sends to / expects from each group rank, for collectives whose sizes differ
  // per peer (all_gather, gather, scatter, reduce_scatter, all_to_all); empty otherwise.
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;

  void describeTensor(const at::Tensor& t);  // dtype, numel, shape
  // Coalesced collectives: the first tensor's dtype, the total numel, and a hash of the sizes.
  void describeTensors(const std::vector<at::Tensor>& ts);
  std::vector<int64_t> encode(int group_size) const;
  static Fingerprint decode(const int64_t* data, int group_size);
  static int64_t encodedLength(int group_size);
  std::string tensorText() const;  // "float32[4, 4]"
};

// Compares every rank's fingerprint of one collective; "" when they agree, otherwise what differs,
// naming ranks by `rank_names` (global ranks).
std::string compareFingerprints(const std::vector<Fingerprint>& all, const std::vector<int64_t>& rank_names);

}  // namespace c10d_npu

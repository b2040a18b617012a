// CollectiveCheck.cpp - fingerprint encoding and the cross-rank agreement rules.
#include "csrc/distributed/CollectiveCheck.h"

#include <sstream>

#include <c10/core/ScalarType.h>

namespace c10d_npu {
namespace {

constexpr int kMaxDims = 6;
constexpr int64_t kFixed = 8 + kMaxDims;  // kind, seq, op, dtype, root, numel, layout, ndim, dims

const char* reduceOpName(int64_t op) {
  static const char* names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  return op >= 0 && op < 9 ? names[op] : "none";
}

bool hasReduceOp(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kAllreduceCoalesced:
    case CollectiveKind::kReduce:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduceScatterTensor:
    case CollectiveKind::kReduceScatterCoalesced:
      return true;
    default:
      return false;
  }
}

bool hasRoot(CollectiveKind k) {
  return k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce || k == CollectiveKind::kGather ||
         k == CollectiveKind::kScatter;
}

// Collectives in which every rank passes a tensor of the same size.
bool sameSizeEverywhere(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllreduce:
    case CollectiveKind::kAllreduceCoalesced:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kAllgatherIntoTensor:
    case CollectiveKind::kAllgatherCoalesced:
    case CollectiveKind::kReduceScatterTensor:
    case CollectiveKind::kReduceScatterCoalesced:
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* collectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "all_reduce";
    case CollectiveKind::kAllreduceCoalesced: return "all_reduce_coalesced";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kAllgather: return "all_gather";
    case CollectiveKind::kAllgatherIntoTensor: return "all_gather_into_tensor";
    case CollectiveKind::kAllgatherCoalesced: return "all_gather_coalesced";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kReduceScatterTensor: return "reduce_scatter_tensor";
    case CollectiveKind::kReduceScatterCoalesced: return "reduce_scatter_tensor_coalesced";
    case CollectiveKind::kAlltoall: return "all_to_all";
    case CollectiveKind::kAlltoallSingle: return "all_to_all_single";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kSend: return "send";
    case CollectiveKind::kRecv: return "recv";
  }
  return "collective";
}

void Fingerprint::describeTensor(const at::Tensor& t) {
  dtype = static_cast<int64_t>(t.scalar_type());
  numel = t.numel();
  shape.assign(t.sizes().begin(), t.sizes().end());
}

void Fingerprint::describeTensors(const std::vector<at::Tensor>& ts) {
  dtype = ts.empty() ? -1 : static_cast<int64_t>(ts[0].scalar_type());
  numel = 0;
  layout = static_cast<int64_t>(ts.size());
  for (const at::Tensor& t : ts) {
    numel += t.numel();
    layout = layout * 1000003 + t.numel();
  }
}

int64_t Fingerprint::encodedLength(int group_size) { return kFixed + 2 * static_cast<int64_t>(group_size); }

std::vector<int64_t> Fingerprint::encode(int group_size) const {
  std::vector<int64_t> out(encodedLength(group_size), 0);
  out[0] = static_cast<int64_t>(kind);
  out[1] = seq;
  out[2] = reduce_op;
  out[3] = dtype;
  out[4] = root;
  out[5] = numel;
  out[6] = layout;
  out[7] = static_cast<int64_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < kMaxDims; ++i) out[8 + i] = shape[i];
  for (size_t i = 0; i < send_counts.size(); ++i) out[kFixed + i] = send_counts[i];
  for (size_t i = 0; i < recv_counts.size(); ++i) out[kFixed + group_size + i] = recv_counts[i];
  return out;
}

Fingerprint Fingerprint::decode(const int64_t* data, int group_size) {
  Fingerprint f;
  f.kind = static_cast<CollectiveKind>(data[0]);
  f.seq = data[1];
  f.reduce_op = data[2];
  f.dtype = data[3];
  f.root = data[4];
  f.numel = data[5];
  f.layout = data[6];
  int64_t ndim = data[7];
  for (int64_t i = 0; i < ndim && i < kMaxDims; ++i) f.shape.push_back(data[8 + i]);
  if (ndim > kMaxDims) f.shape.push_back(-1);  // shown as "..."
  f.send_counts.assign(data + kFixed, data + kFixed + group_size);
  f.recv_counts.assign(data + kFixed + group_size, data + kFixed + 2 * group_size);
  return f;
}

std::string Fingerprint::tensorText() const {
  std::ostringstream out;
  out << (dtype >= 0 ? c10::toString(static_cast<c10::ScalarType>(dtype)) : "?") << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out << ", ";
    if (shape[i] < 0) out << "..."; else out << shape[i];
  }
  out << "]";
  return out.str();
}

std::string compareFingerprints(const std::vector<Fingerprint>& all, const std::vector<int64_t>& names) {
  const Fingerprint& first = all.front();
  std::ostringstream out;
  auto list = [&](auto&& describe) {
    for (size_t r = 0; r < all.size(); ++r) {
      out << (r ? ", " : "") << "rank " << names[r] << ": " << describe(all[r]);
    }
  };
  for (const Fingerprint& f : all) {
    if (f.kind != first.kind) {
      out << "the ranks called different collectives (";
      list([](const Fingerprint& g) { return std::string(collectiveName(g.kind)); });
      out << "); every rank of a group must call the same collectives in the same order";
      return out.str();
    }
  }
  bool tensors = first.kind != CollectiveKind::kBarrier;
  for (const Fingerprint& f : all) {
    if (tensors && f.dtype != first.dtype) {
      out << "the ranks passed tensors of different dtypes (";
      list([](const Fingerprint& g) { return g.tensorText(); });
      out << ")";
      return out.str();
    }
    if (hasReduceOp(first.kind) && f.reduce_op != first.reduce_op) {
      out << "the ranks passed different reduce ops (";
      list([](const Fingerprint& g) { return std::string(reduceOpName(g.reduce_op)); });
      out << ")";
      return out.str();
    }
    if (hasRoot(first.kind) && f.root != first.root) {
      out << "the ranks passed different roots (";
      list([&](const Fingerprint& g) { return std::to_string(names.at(g.root)); });
      out << ")";
      return out.str();
    }
    if (sameSizeEverywhere(first.kind) && (f.numel != first.numel || f.layout != first.layout)) {
      out << "the ranks passed tensors of different sizes (";
      list([](const Fingerprint& g) { return g.tensorText(); });
      out << "); every rank must pass the same shape";
      return out.str();
    }
  }
  // Per-peer sizes: what rank r sends to rank j must be what rank j expects from rank r.
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].send_counts.empty()) continue;
    for (size_t j = 0; j < all.size(); ++j) {
      if (all[j].recv_counts.empty()) continue;
      int64_t sent = all[r].send_counts[j], expected = all[j].recv_counts[r];
      if (sent != expected) {
        out << "rank " << names[r] << " sends " << sent << " elements to rank " << names[j]
            << ", which expects " << expected << " from it (";
        list([](const Fingerprint& g) { return g.tensorText(); });
        out << ")";
        return out.str();
      }
    }
  }
  return "";
}

}  // namespace c10d_npu

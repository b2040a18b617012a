// HostCollectives.cpp - collectives over host views on Gloo (see HostCollectives.h).
#include "csrc/distributed/HostCollectives.h"

#include <numeric>

#include "csrc/framework/HostView.h"

namespace c10d_npu::host {
namespace {

using Millis = std::chrono::milliseconds;
using RedOp = c10d::ReduceOp;

// A tensor as Gloo sees it: the view itself when contiguous, else a staging copy; store() writes
// a staged result back.
struct Dense {
  at::Tensor view;
  at::Tensor dense;
  Dense(const at::Tensor& v, bool load) : view(v) {
    dense = v.is_contiguous() ? v : (load ? v.contiguous() : at::empty(v.sizes(), v.options()));
  }
  void store() const {
    if (!dense.is_same(view)) view.copy_(dense);
  }
};

at::Tensor bytes(const at::Tensor& contiguous) { return contiguous.reshape({-1}).view(at::kByte); }

int64_t nbytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Gloo has no AVG / PREMUL_SUM (emulated around a SUM) and reduces bool as bytes.
RedOp glooOp(at::ScalarType dtype, RedOp::RedOpType op) {
  if (op == RedOp::AVG || op == RedOp::PREMUL_SUM) op = RedOp::SUM;
  if (dtype == at::kBool) {
    if (op == RedOp::SUM) op = RedOp::MAX;
    else if (op == RedOp::PRODUCT) op = RedOp::MIN;
  }
  return RedOp(op);
}

at::Tensor wire(const at::Tensor& dense) { return dense.scalar_type() == at::kBool ? dense.view(at::kByte) : dense; }

void premultiply(const at::Tensor& t, const Reduction& red) {
  if (red.op == RedOp::PREMUL_SUM) t.mul_(red.premulFactor());
}

void average(const at::Tensor& t, const Reduction& red, int size) {
  if (red.op != RedOp::AVG) return;
  if (at::isFloatingType(t.scalar_type())) t.div_(size);
  else t.div_(size, "trunc");
}

// All-to-all of 1-D byte tensors with per-rank byte counts: the general form behind gather,
// scatter, all_to_all and uneven all_gather.
void alltoallBytes(Context& c, at::Tensor recv, at::Tensor send, std::vector<int64_t> recv_counts,
                   std::vector<int64_t> send_counts) {
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::AllToAllOptions o;
    o.timeout = t;
    return c.gloo.data().alltoall_base(recv, send, recv_counts, send_counts, o);
  });
}

// Copies consecutive pieces of a 1-D byte tensor into `outs` (their sizes, in order).
void unpack(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  int64_t offset = 0;
  for (const at::Tensor& out : outs) {
    Dense d(out, false);
    bytes(d.dense).copy_(flat.narrow(0, offset, nbytes(out)));
    d.store();
    offset += nbytes(out);
  }
}

at::Tensor pack(const std::vector<at::Tensor>& ins) {
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& t : ins) pieces.push_back(bytes(t.contiguous()));
  return pieces.empty() ? at::empty({0}, at::kByte) : at::cat(pieces);
}

}  // namespace

Reduction Reduction::from(const c10d::ReduceOp& op) {
  Reduction r;
  r.op = op.op_;
  if (op.op_ == RedOp::PREMUL_SUM) {
    auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(s != nullptr, "ReduceOp.PREMUL_SUM needs a factor: build it with "
                              "torch.distributed._make_nccl_premul_sum(factor)");
    if (s->tensor_factor.defined()) {
      r.factor_view = s->tensor_factor.device().is_privateuseone() ? at_npu::native::hostView(s->tensor_factor)
                                                                   : s->tensor_factor;
    } else {
      r.factor = s->double_factor;
    }
  }
  return r;
}

double Reduction::premulFactor() const { return factor_view.defined() ? factor_view.item<double>() : factor; }

void checkReducible(const char* collective, at::ScalarType dtype, const c10d::ReduceOp& op) {
  switch (dtype) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kChar: case at::kByte: case at::kInt: case at::kLong: case at::kBool:
      break;
    default:
      TORCH_CHECK_TYPE(false, "hccl ", collective, " cannot reduce ", c10::toString(dtype),
                       " tensors (supported: float32, float64, float16, bfloat16, int8, uint8, int32, "
                       "int64, bool); convert the tensor first, e.g. with .to(torch.int32) or .float()");
  }
  bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  switch (op.op_) {
    case RedOp::BAND: case RedOp::BOR: case RedOp::BXOR:
      TORCH_CHECK_TYPE(integral, "hccl ", collective, ": ReduceOp.", op.op_ == RedOp::BAND ? "BAND" :
                       op.op_ == RedOp::BOR ? "BOR" : "BXOR", " needs integer or bool tensors, got ",
                       c10::toString(dtype));
      break;
    case RedOp::AVG:
      TORCH_CHECK_TYPE(dtype != at::kBool, "hccl ", collective, ": ReduceOp.AVG cannot average bool tensors");
      break;
    case RedOp::PREMUL_SUM:
      TORCH_CHECK_TYPE(at::isFloatingType(dtype), "hccl ", collective,
                       ": ReduceOp.PREMUL_SUM needs floating-point tensors, got ", c10::toString(dtype));
      break;
    case RedOp::UNUSED:
      TORCH_CHECK_VALUE(false, "hccl ", collective, ": ReduceOp.UNUSED is not a reduction");
    default:
      break;
  }
}

void allreduce(Context& c, const std::vector<at::Tensor>& views, const Reduction& red) {
  // Coalesced tensors travel as one flat buffer, in a single Gloo call.
  std::vector<Dense> dense;
  at::Tensor buf;
  if (views.size() == 1) {
    dense.emplace_back(views[0], true);
    buf = dense[0].dense;
  } else {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& v : views) flat.push_back(v.reshape({-1}));
    buf = at::cat(flat);
  }
  if (buf.numel() == 0) return;
  premultiply(buf, red);
  at::Tensor w = wire(buf);
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::AllreduceOptions o;
    o.reduceOp = glooOp(buf.scalar_type(), red.op);
    o.timeout = t;
    std::vector<at::Tensor> tensors{w};
    return c.gloo.data().allreduce(tensors, o);
  });
  average(buf, red, c.size);
  if (views.size() == 1) {
    dense[0].store();
    return;
  }
  int64_t offset = 0;
  for (const at::Tensor& v : views) {
    v.copy_(buf.narrow(0, offset, v.numel()).view(v.sizes()));
    offset += v.numel();
  }
}

void broadcast(Context& c, const at::Tensor& view, int root) {
  Dense d(view, c.rank == root);
  if (view.numel() == 0) return;
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = t;
    std::vector<at::Tensor> tensors{bytes(d.dense)};
    return c.gloo.data().broadcast(tensors, o);
  });
  if (c.rank != root) d.store();
}

void reduce(Context& c, const at::Tensor& view, const Reduction& red, int root) {
  // Gloo uses the buffers of the other ranks as scratch; theirs stay untouched, as with NCCL.
  bool is_root = c.rank == root;
  Dense d(view, true);
  at::Tensor buf = is_root ? d.dense : view.clone(at::MemoryFormat::Contiguous);
  if (buf.numel() == 0) return;
  premultiply(buf, red);
  at::Tensor w = wire(buf);
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::ReduceOptions o;
    o.rootRank = root;
    o.reduceOp = glooOp(buf.scalar_type(), red.op);
    o.timeout = t;
    std::vector<at::Tensor> tensors{w};
    return c.gloo.data().reduce(tensors, o);
  });
  if (is_root) {
    average(buf, red, c.size);
    d.store();
  }
}

void allgather(Context& c, const std::vector<at::Tensor>& outs, const at::Tensor& in) {
  Dense src(in, true);
  bool even = std::all_of(outs.begin(), outs.end(), [&](const at::Tensor& o) { return o.numel() == in.numel(); });
  if (!even) {
    // Uneven sizes (already agreed by every rank): each rank sends its input to every rank.
    std::vector<int64_t> send_counts(c.size, nbytes(in)), recv_counts;
    for (const at::Tensor& o : outs) recv_counts.push_back(nbytes(o));
    at::Tensor recv = at::empty({std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})}, at::kByte);
    alltoallBytes(c, recv, bytes(src.dense).repeat({c.size}), recv_counts, send_counts);
    unpack(recv, outs);
    return;
  }
  if (in.numel() == 0) return;
  std::vector<Dense> dst;
  for (const at::Tensor& o : outs) dst.emplace_back(o, false);
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::AllgatherOptions o;
    o.timeout = t;
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (const Dense& d : dst) outputs[0].push_back(bytes(d.dense));
    std::vector<at::Tensor> inputs{bytes(src.dense)};
    return c.gloo.data().allgather(outputs, inputs, o);
  });
  for (const Dense& d : dst) d.store();
}

void allgatherIntoTensor(Context& c, const at::Tensor& out, const at::Tensor& in) {
  Dense dst(out, false);
  at::Tensor flat = bytes(dst.dense);
  std::vector<at::Tensor> chunks;
  for (int r = 0; r < c.size; ++r) chunks.push_back(flat.narrow(0, r * nbytes(in), nbytes(in)));
  allgather(c, chunks, bytes(in.contiguous()));
  dst.store();
}

void gather(Context& c, const std::vector<at::Tensor>& outs, const at::Tensor& in, int root) {
  std::vector<int64_t> send_counts(c.size, 0), recv_counts(c.size, 0);
  send_counts[root] = nbytes(in);
  if (c.rank == root) {
    for (int r = 0; r < c.size; ++r) recv_counts[r] = nbytes(outs[r]);
  }
  at::Tensor recv = at::empty({std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})}, at::kByte);
  alltoallBytes(c, recv, bytes(in.contiguous()), recv_counts, send_counts);
  if (c.rank == root) unpack(recv, outs);
}

void scatter(Context& c, const at::Tensor& out, const std::vector<at::Tensor>& ins, int root) {
  std::vector<int64_t> send_counts(c.size, 0), recv_counts(c.size, 0);
  recv_counts[root] = nbytes(out);
  at::Tensor send = at::empty({0}, at::kByte);
  if (c.rank == root) {
    for (int r = 0; r < c.size; ++r) send_counts[r] = nbytes(ins[r]);
    send = pack(ins);
  }
  at::Tensor recv = at::empty({nbytes(out)}, at::kByte);
  alltoallBytes(c, recv, send, recv_counts, send_counts);
  unpack(recv, {out});
}

void reduceScatter(Context& c, const at::Tensor& out, const std::vector<at::Tensor>& ins, const Reduction& red) {
  Dense dst(out, false);
  if (out.numel() == 0) return;
  // Inputs are not modified: PREMUL_SUM scales copies.
  std::vector<at::Tensor> srcs;
  for (const at::Tensor& in : ins) {
    srcs.push_back(red.op == RedOp::PREMUL_SUM ? in.mul(red.premulFactor()).contiguous() : in.contiguous());
  }
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::ReduceScatterOptions o;
    o.reduceOp = glooOp(out.scalar_type(), red.op);
    o.timeout = t;
    std::vector<at::Tensor> outputs{wire(dst.dense)};
    std::vector<std::vector<at::Tensor>> inputs(1);
    for (const at::Tensor& s : srcs) inputs[0].push_back(wire(s));
    return c.gloo.data().reduce_scatter(outputs, inputs, o);
  });
  average(dst.dense, red, c.size);
  dst.store();
}

void reduceScatterTensor(Context& c, const at::Tensor& out, const at::Tensor& in, const Reduction& red) {
  Dense dst(out, false);
  if (out.numel() == 0) return;
  at::Tensor src = red.op == RedOp::PREMUL_SUM ? in.mul(red.premulFactor()).contiguous() : in.contiguous();
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::ReduceScatterOptions o;
    o.reduceOp = glooOp(out.scalar_type(), red.op);
    o.timeout = t;
    at::Tensor w_out = wire(dst.dense), w_in = wire(src);
    return c.gloo.data()._reduce_scatter_base(w_out, w_in, o);
  });
  average(dst.dense, red, c.size);
  dst.store();
}

void alltoall(Context& c, const std::vector<at::Tensor>& outs, const std::vector<at::Tensor>& ins) {
  std::vector<int64_t> send_counts, recv_counts;
  for (const at::Tensor& t : ins) send_counts.push_back(nbytes(t));
  for (const at::Tensor& t : outs) recv_counts.push_back(nbytes(t));
  at::Tensor recv = at::empty({std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0})}, at::kByte);
  alltoallBytes(c, recv, pack(ins), recv_counts, send_counts);
  unpack(recv, outs);
}

void alltoallSingle(Context& c, const at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_counts,
                    const std::vector<int64_t>& in_counts) {
  Dense dst(out, false), src(in, true);
  std::vector<int64_t> recv_bytes, send_bytes;
  for (int64_t n : out_counts) recv_bytes.push_back(n * static_cast<int64_t>(out.element_size()));
  for (int64_t n : in_counts) send_bytes.push_back(n * static_cast<int64_t>(in.element_size()));
  alltoallBytes(c, bytes(dst.dense), bytes(src.dense), recv_bytes, send_bytes);
  dst.store();
}

void barrier(Context& c) {
  c.gloo.run(c.deadline, [&](Millis t) {
    c10d::BarrierOptions o;
    o.timeout = t;
    return c.gloo.data().barrier(o);
  });
}

}  // namespace c10d_npu::host

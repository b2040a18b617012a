// FlashAttentionOps.cpp - the FlashAttentionScore device ops (forward, backward, variable-length
// forms) and the dropout mask they read, with CANN's parameters, on FlashAttentionKernel.
#include <ATen/ops/zeros.h>

#include <cstring>
#include <string>

#include "AtenOpSupport.h"
#include "FlashAttentionKernel.h"

using namespace npu::opslib::aten;

namespace {

// pre / next tokens at INT32_MAX or beyond mean "no limit", as torch_npu's defaults (2147483647) do.
int64_t tokens(int64_t value) { return value >= 2147483647 ? INT64_MAX : value; }

struct Shapes {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, d = 0, dv = 0;
  std::vector<int64_t> q_len, kv_len, q_start, kv_start;  // per batch (TND: from the cumulative lengths)
};

// Where the rows of `t` (holding heads of `head_size` values) live in `layout`; `starts` are the
// per-batch token offsets of TND.
RowLayout rowsOf(const std::string& layout, const at::Tensor& t, int64_t head_size, int64_t batch,
                 const std::vector<int64_t>& starts) {
  RowLayout r;
  int64_t bdim = 0, sdim = 0;
  if (layout == "TND") {
    r.seq_stride = t.stride(0);
    r.head_stride = t.stride(1);
    for (int64_t b = 0; b < batch; ++b) r.batch_offset.push_back(starts[b] * r.seq_stride);
    return r;
  }
  if (layout == "BSH" || layout == "SBH") {
    bdim = layout == "BSH" ? 0 : 1;
    sdim = layout == "BSH" ? 1 : 0;
    r.head_stride = head_size;
  } else {
    const int64_t ndim = layout == "BSND" ? 2 : 1;
    sdim = layout == "BSND" ? 1 : 2;
    r.head_stride = t.stride(ndim);
  }
  r.seq_stride = t.stride(sdim);
  for (int64_t b = 0; b < batch; ++b) r.batch_offset.push_back(b * t.stride(bdim));
  return r;
}

// Sizes of query / key / value per layout, and their row layouts.
Shapes shapesOf(const char* op, const std::string& layout, const at::Tensor& q, const at::Tensor& k,
                const at::Tensor& v, int64_t head_num, const std::vector<int64_t>& cum_q,
                const std::vector<int64_t>& cum_kv, AttentionProblem* p) {
  TORCH_CHECK(head_num > 0, op, ": head_num must be positive, got ", head_num);
  Shapes s;
  if (layout == "TND") {
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, op, ": TND takes [T, N, D] query, key and value, got ",
                q.sizes(), ", ", k.sizes(), " and ", v.sizes());
    TORCH_CHECK(!cum_q.empty() && cum_q.size() == cum_kv.size(), op,
                ": TND needs actual_seq_qlen and actual_seq_kvlen of the same length (cumulative sequence ends)");
    s.batch = static_cast<int64_t>(cum_q.size());
    s.q_heads = q.size(1);
    s.kv_heads = k.size(1);
    s.d = q.size(2);
    s.dv = v.size(2);
    TORCH_CHECK(s.q_heads == head_num, op, ": head_num is ", head_num, " but the query has ", s.q_heads, " heads");
    int64_t q_prev = 0, kv_prev = 0;
    for (int64_t b = 0; b < s.batch; ++b) {
      TORCH_CHECK(cum_q[b] >= q_prev && cum_kv[b] >= kv_prev, op,
                  ": actual_seq_qlen / actual_seq_kvlen must be cumulative (non-decreasing) sequence ends, got ",
                  c10::IntArrayRef(cum_q), " / ", c10::IntArrayRef(cum_kv));
      s.q_start.push_back(q_prev);
      s.kv_start.push_back(kv_prev);
      s.q_len.push_back(cum_q[b] - q_prev);
      s.kv_len.push_back(cum_kv[b] - kv_prev);
      q_prev = cum_q[b];
      kv_prev = cum_kv[b];
    }
    TORCH_CHECK(q_prev <= q.size(0) && kv_prev <= k.size(0), op, ": actual_seq_qlen / actual_seq_kvlen end at ",
                q_prev, " / ", kv_prev, " beyond the ", q.size(0), " / ", k.size(0), " tokens given");
  } else if (layout == "BSH" || layout == "SBH") {
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, op, ": ", layout,
                " takes 3-D query, key and value, got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
    const int64_t bdim = layout == "BSH" ? 0 : 1, sdim = layout == "BSH" ? 1 : 0;
    TORCH_CHECK(q.size(2) % head_num == 0, op, ": the query's hidden size ", q.size(2),
                " is not a multiple of head_num ", head_num);
    s.batch = q.size(bdim);
    s.q_heads = head_num;
    s.d = q.size(2) / head_num;
    TORCH_CHECK(s.d > 0 && k.size(2) % s.d == 0, op, ": the key's hidden size ", k.size(2),
                " is not a multiple of the head size ", s.d);
    s.kv_heads = k.size(2) / s.d;
    TORCH_CHECK(s.kv_heads > 0 && v.size(2) % s.kv_heads == 0, op, ": the value's hidden size ", v.size(2),
                " is not a multiple of the key's ", s.kv_heads, " heads");
    s.dv = v.size(2) / s.kv_heads;
    TORCH_CHECK(k.size(bdim) == s.batch && v.size(bdim) == s.batch, op, ": query, key and value disagree on the batch");
    s.q_len.assign(s.batch, q.size(sdim));
    s.kv_len.assign(s.batch, k.size(sdim));
  } else {
    TORCH_CHECK(layout == "BSND" || layout == "BNSD", op,
                ": input_layout must be one of BSH, SBH, BSND, BNSD, TND, got '", layout, "'");
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": ", layout,
                " takes 4-D query, key and value, got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
    const int64_t ndim = layout == "BSND" ? 2 : 1, sdim = layout == "BSND" ? 1 : 2;
    s.batch = q.size(0);
    s.q_heads = q.size(ndim);
    s.kv_heads = k.size(ndim);
    s.d = q.size(3);
    s.dv = v.size(3);
    TORCH_CHECK(s.q_heads == head_num, op, ": head_num is ", head_num, " but the query has ", s.q_heads, " heads");
    TORCH_CHECK(k.size(0) == s.batch && v.size(0) == s.batch, op, ": query, key and value disagree on the batch");
    s.q_len.assign(s.batch, q.size(sdim));
    s.kv_len.assign(s.batch, k.size(sdim));
  }
  TORCH_CHECK(k.size(-1) == (layout == "BSH" || layout == "SBH" ? s.kv_heads * s.d : s.d), op,
              ": key and query must have one head size");
  TORCH_CHECK(s.dv > 0, op, ": the value's head size must be positive, got ", v.sizes());
  p->q = rowsOf(layout, q, s.d, s.batch, s.q_start);
  p->k = rowsOf(layout, k, s.d, s.batch, s.kv_start);
  p->v = rowsOf(layout, v, s.dv, s.batch, s.kv_start);
  return s;
}

// Everything but the operands' memory: shapes, layouts, the mask rule of the sparse mode, bias and dropout.
struct Setup {
  AttentionProblem problem;
  StatsLayout stats;
  Shapes shapes;
  std::string layout;
  at::Tensor pse_float;  // the bias in float32, when given in another dtype
  at::Tensor sink_float;
  int64_t pse_rows_full = 0;  // rows of the bias gradient's work buffer
};

struct Args {
  const char* op;
  std::string layout;
  at::Tensor q, k, v, pse, drop, mask, sink;
  std::vector<int64_t> prefix, cum_q, cum_kv;
  double scale = 1.0, keep_prob = 1.0;
  int64_t pre_tokens = 0, next_tokens = 0, head_num = 0, sparse_mode = 0, pse_type = 1;
  std::string softmax_layout;  // "" (TND: N-major statistics) or "same_as_input"
};

// The first / last batch with a non-empty sequence (sparse modes 8 / 7 put the band there).
int64_t firstNonEmpty(const Shapes& s, bool last) {
  for (int64_t x = 0; x < s.batch; ++x) {
    const int64_t b = last ? s.batch - 1 - x : x;
    if (s.q_len[b] > 0 && s.kv_len[b] > 0) return b;
  }
  return -1;
}

Setup setUp(const Args& a) {
  const char* op = a.op;
  const at::Tensor &q = a.q, &k = a.k, &v = a.v;
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
              ": query, key and value must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  TORCH_CHECK(q.stride(-1) == 1 && k.stride(-1) == 1 && v.stride(-1) == 1, op,
              ": query, key and value must be contiguous in their last dimension");
  TORCH_CHECK(a.keep_prob > 0.0 && a.keep_prob <= 1.0, op, ": keep_prob must be in (0, 1], got ", a.keep_prob);
  Setup setup;
  setup.layout = a.layout;
  AttentionProblem& p = setup.problem;
  const Shapes s = shapesOf(op, a.layout, q, k, v, a.head_num, a.cum_q, a.cum_kv, &p);
  setup.shapes = s;
  TORCH_CHECK(s.kv_heads > 0 && s.q_heads % s.kv_heads == 0, op, ": the query's ", s.q_heads,
              " heads are not a multiple of the key's ", s.kv_heads, " (grouped-query attention needs N1 % N2 == 0)");
  p.batch = s.batch;
  p.q_heads = s.q_heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.d;
  p.value_dim = s.dv;
  p.q_len = s.q_len;
  p.kv_len = s.kv_len;
  p.scale = a.scale;
  p.keep_prob = a.keep_prob;
  const bool varlen = a.layout == "TND";
  const int64_t mode = a.sparse_mode;
  TORCH_CHECK(mode >= 0 && mode <= 8, op, ": sparse_mode must be 0 to 8, got ", mode);
  TORCH_CHECK(varlen || mode <= 6, op, ": sparse_mode ", mode, " is for variable-length (TND) inputs only");
  TORCH_CHECK(!varlen || mode != 5, op, ": sparse_mode 5 (prefix) does not take TND inputs; use 6");
  TORCH_CHECK(!(mode == 7 || mode == 8) || !a.pse.defined(), op, ": sparse_mode ", mode, " does not take pse");

  // The mask rule of the sparse mode. Without atten_mask every mode computes in full (as on NPUs:
  // sparse_mode, pre_tockens and next_tockens take effect with a mask only). A compressed mask (modes
  // 2, 3, 4, 6, 7, 8) only says "masked by the rule", so its contents are not read.
  MaskRule& m = p.mask;
  m.shift.assign(s.batch, 0);
  m.pre.assign(s.batch, INT64_MAX);
  m.next.assign(s.batch, INT64_MAX);
  const bool masked = a.mask.defined();
  auto right_down = [&](int64_t b) { m.shift[b] = s.kv_len[b] - s.q_len[b]; };
  auto band = [&](int64_t b) {
    m.pre[b] = tokens(a.pre_tokens);
    m.next[b] = tokens(a.next_tokens);
  };
  if (masked) {
    for (int64_t b = 0; b < s.batch; ++b) {
      switch (mode) {
        case 0:  // defaultMask: the mask given, within pre / next tokens of the top-left diagonal
          band(b);
          break;
        case 1:  // allMask: the mask given
          break;
        case 2:  // leftUpCausal
          m.next[b] = 0;
          break;
        case 3:  // rightDownCausal
          right_down(b);
          m.next[b] = 0;
          break;
        case 4:  // band around the right-down diagonal
          right_down(b);
          band(b);
          break;
        case 5:  // prefix: right-down causal, plus the first prefix[b] keys (mask given in full)
        case 6:  // prefix, compressed mask
          right_down(b);
          m.next[b] = 0;
          break;
        case 7:  // right-down causal; the last sequence a right-down band
          right_down(b);
          if (b == firstNonEmpty(s, true)) band(b); else m.next[b] = 0;
          break;
        case 8:  // left-up causal; the first sequence a right-down band
          if (b == firstNonEmpty(s, false)) {
            right_down(b);
            band(b);
          } else {
            m.next[b] = 0;
          }
          break;
      }
    }
    if (mode == 5 || mode == 6) {
      TORCH_CHECK(static_cast<int64_t>(a.prefix.size()) == s.batch, op, ": sparse_mode ", mode,
                  " needs prefix with one value per batch (", s.batch, "), got ", a.prefix.size());
      m.prefix = a.prefix;
    }
  }
  const bool full_mask = mode == 0 || mode == 1 || mode == 5;
  if (masked && full_mask) {
    at::Tensor mask = a.mask.scalar_type() == at::kBool || a.mask.scalar_type() == at::kByte ? a.mask : a.mask.ne(0);
    const int64_t max_q = *std::max_element(s.q_len.begin(), s.q_len.end());
    const int64_t max_kv = *std::max_element(s.kv_len.begin(), s.kv_len.end());
    TORCH_CHECK(mask.dim() == 2 || mask.dim() == 4, op,
                ": atten_mask must be [Sq, Skv], [B, 1, Sq, Skv] or [B, N, Sq, Skv], got ", mask.sizes());
    TORCH_CHECK(mask.size(-2) >= max_q && mask.size(-1) >= max_kv, op, ": atten_mask ", mask.sizes(),
                " is smaller than the scores (", max_q, " x ", max_kv, ")");
    m.explicit_mask = mask;
    m.mask_i = mask.stride(-2);
    m.mask_j = mask.stride(-1);
    if (mask.dim() == 4) {
      TORCH_CHECK((mask.size(0) == 1 || mask.size(0) == s.batch) && (mask.size(1) == 1 || mask.size(1) == s.q_heads),
                  op, ": atten_mask ", mask.sizes(), " does not match batch ", s.batch, " and heads ", s.q_heads);
      m.mask_b = mask.size(0) == 1 ? 0 : mask.stride(0);
      m.mask_n = mask.size(1) == 1 ? 0 : mask.stride(1);
    }
  }

  if (a.pse.defined()) {
    const at::Tensor& pse = a.pse;
    TORCH_CHECK(pse.dim() == 4, op, ": pse must be 4-D ([B or 1, N or 1, Sq, Skv]), got ", pse.sizes());
    const int64_t max_q = *std::max_element(s.q_len.begin(), s.q_len.end());
    const int64_t max_kv = *std::max_element(s.kv_len.begin(), s.kv_len.end());
    TORCH_CHECK((pse.size(0) == 1 || pse.size(0) == s.batch) && (pse.size(1) == 1 || pse.size(1) == s.q_heads), op,
                ": pse ", pse.sizes(), " does not match batch ", s.batch, " and heads ", s.q_heads);
    TORCH_CHECK(pse.size(3) >= max_kv, op, ": pse has ", pse.size(3), " columns for ", max_kv, " keys");
    const bool compressed = pse.size(2) == 1024 && max_q > 1024;
    TORCH_CHECK(pse.size(2) == max_q || pse.size(2) == 1 || compressed, op, ": pse has ", pse.size(2), " rows for ",
                max_q, " queries (give Sq rows, 1 row to broadcast, or the compressed alibi form of 1024 rows)");
    setup.pse_float = pse.scalar_type() == at::kFloat ? pse : pse.to(at::kFloat);
    p.pse = setup.pse_float;
    p.pse_b = pse.size(0) == 1 ? 0 : p.pse.stride(0);
    p.pse_n = pse.size(1) == 1 ? 0 : p.pse.stride(1);
    p.pse_i = pse.size(2) == 1 ? 0 : p.pse.stride(2);
    p.pse_j = p.pse.stride(3);
    p.pse_rows = compressed ? 1024 : 0;
    setup.pse_rows_full = compressed ? 1024 : max_q;
    TORCH_CHECK(a.pse_type == 0 || a.pse_type == 1, op, ": pse_type must be 0 (pse added after scaling) or 1 ",
                "(before), got ", a.pse_type);
    p.pse_scale = a.pse_type == 1 ? static_cast<float>(a.scale) : 1.0f;
  }

  if (a.sink.defined()) {
    TORCH_CHECK(a.sink.dim() == 1 && a.sink.size(0) == s.q_heads, op, ": sink must be [head_num] (", s.q_heads,
                "), got ", a.sink.sizes());
    setup.sink_float = a.sink.to(at::kFloat).contiguous();
    p.sink = setup.sink_float.const_data_ptr<float>();
  }

  if (a.keep_prob < 1.0) {
    TORCH_CHECK(a.drop.defined(), op, ": keep_prob < 1 needs the dropout mask (dropMask)");
    int64_t base = 0;
    for (int64_t b = 0; b < s.batch; ++b) {
      p.drop_base.push_back(base);
      base += s.q_heads * s.q_len[b] * s.kv_len[b];
    }
    TORCH_CHECK(a.drop.numel() * a.drop.element_size() * 8 >= base, op, ": the dropout mask holds ",
                a.drop.numel() * a.drop.element_size() * 8, " bits for ", base, " scores");
    p.drop_bits = static_cast<const uint8_t*>(a.drop.const_data_ptr());
  }

  // softmax_max / softmax_sum: [B, N, Sq, 8]; TND: [T, N, 8], N-major in memory unless the
  // statistics are laid out as the input (softmax_layout "TND").
  StatsLayout& st = setup.stats;
  st.lanes = 8;
  if (varlen) {
    TORCH_CHECK(a.softmax_layout.empty() || a.softmax_layout == "same_as_input", op,
                ": softmaxLayout must be empty or \"same_as_input\", got '", a.softmax_layout, "'");
    const int64_t t = q.size(0);
    if (a.softmax_layout.empty()) {
      st.head_stride = t * 8;
      st.seq_stride = 8;
      for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(s.q_start[b] * 8);
    } else {
      st.head_stride = 8;
      st.seq_stride = s.q_heads * 8;
      for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(s.q_start[b] * st.seq_stride);
    }
  } else {
    const int64_t sq = s.q_len[0];
    st.seq_stride = 8;
    st.head_stride = sq * 8;
    for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(b * s.q_heads * sq * 8);
  }
  return setup;
}

// The output's (and the output gradient's) row layout: the query's sizes with the value's head size.
RowLayout outputRows(const Setup& setup, const at::Tensor& q, const at::Tensor& out, const char* what) {
  const Shapes& s = setup.shapes;
  std::vector<int64_t> expected = q.sizes().vec();
  const bool hidden = setup.layout == "BSH" || setup.layout == "SBH";
  expected.back() = hidden ? s.q_heads * s.dv : s.dv;
  TORCH_CHECK(out.sizes().vec() == expected && out.stride(-1) == 1, what, " must be ", c10::IntArrayRef(expected),
              " (the query's shape with the value's head size), contiguous in its last dimension; got ", out.sizes());
  return rowsOf(setup.layout, out, s.dv, s.batch, s.q_start);
}

std::string stringOf(const char* value, const char* what) {
  TORCH_CHECK(value != nullptr, what, " is NULL");
  return value;
}

// An optional operand given as an empty tensor counts as absent (torch_npu passes empty outputs).
at::Tensor optionalTensor(const aclTensor* t) {
  at::Tensor x = hostTensor(t);
  return x.defined() && x.numel() > 0 ? x : at::Tensor();
}
at::Tensor optionalTensor(aclTensor* t) { return optionalTensor(static_cast<const aclTensor*>(t)); }

struct ForwardIo {
  const aclTensor *query, *queryRope = nullptr, *key, *keyRope = nullptr, *value, *realShift, *dropMask, *paddingMask,
      *attenMask, *sink = nullptr;
  const aclIntArray *prefix, *actualSeqQLen = nullptr, *actualSeqKvLen = nullptr;
  double scaleValue, keepProb;
  int64_t preTokens, nextTokens, headNum;
  const char* inputLayout;
  int64_t innerPrecise, sparseMode, pseType = 1;
  const char* softmaxLayout = nullptr;
  aclTensor *softmaxMaxOut, *softmaxSumOut, *softmaxOutOut, *attentionOutOut;
};

Args argsOf(const char* op, const aclTensor* query, const aclTensor* queryRope, const aclTensor* key,
            const aclTensor* keyRope, const aclTensor* value, const aclTensor* pse, const aclTensor* dropMask,
            const aclTensor* paddingMask, const aclTensor* attenMask, const aclTensor* sink, const aclIntArray* prefix,
            const aclIntArray* qlen, const aclIntArray* kvlen, double scale, double keepProb, int64_t pre,
            int64_t next, int64_t headNum, const char* layout, int64_t sparseMode, int64_t pseType,
            const char* softmaxLayout) {
  TORCH_CHECK(optionalTensor(paddingMask).defined() == false, op,
              ": padding_mask is reserved (as on NPUs): pass None and give sequence lengths with TND's "
              "actual_seq_qlen / actual_seq_kvlen");
  TORCH_CHECK(!optionalTensor(queryRope).defined() && !optionalTensor(keyRope).defined(), op,
              ": query_rope / key_rope are not taken: concatenate them to query / key along the head dimension");
  Args a;
  a.op = op;
  a.layout = stringOf(layout, "inputLayout");
  for (auto& c : a.layout) c = static_cast<char>(toupper(c));
  a.q = requiredTensor(query, "query");
  a.k = requiredTensor(key, "key");
  a.v = requiredTensor(value, "value");
  a.pse = optionalTensor(pse);
  a.drop = optionalTensor(dropMask);
  a.mask = optionalTensor(attenMask);
  a.sink = optionalTensor(sink);
  a.prefix = intArray(prefix);
  a.cum_q = intArray(qlen);
  a.cum_kv = intArray(kvlen);
  a.scale = scale;
  a.keep_prob = keepProb;
  a.pre_tokens = pre;
  a.next_tokens = next;
  a.head_num = headNum;
  a.sparse_mode = sparseMode;
  a.pse_type = pseType;
  a.softmax_layout = softmaxLayout == nullptr ? "" : softmaxLayout;
  return a;
}

aclnnStatus forward(const char* op, const ForwardIo& io, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    const Args a = argsOf(op, io.query, io.queryRope, io.key, io.keyRope, io.value, io.realShift, io.dropMask,
                          io.paddingMask, io.attenMask, io.sink, io.prefix, io.actualSeqQLen, io.actualSeqKvLen,
                          io.scaleValue, io.keepProb, io.preTokens, io.nextTokens, io.headNum, io.inputLayout,
                          io.sparseMode, io.pseType, io.softmaxLayout);
    at::Tensor smax = requiredTensor(io.softmaxMaxOut, "softmaxMax");
    at::Tensor ssum = requiredTensor(io.softmaxSumOut, "softmaxSum");
    at::Tensor out = requiredTensor(io.attentionOutOut, "attentionOut");
    auto setup = std::make_shared<Setup>(setUp(a));
    setup->problem.out = outputRows(*setup, a.q, out, "attentionOut");
    const int64_t rows = a.layout == "TND" ? a.q.size(0) * setup->shapes.q_heads
                                           : setup->shapes.batch * setup->shapes.q_heads * setup->shapes.q_len[0];
    TORCH_CHECK(smax.scalar_type() == at::kFloat && ssum.scalar_type() == at::kFloat && smax.is_contiguous() &&
                    ssum.is_contiguous() && smax.numel() == rows * 8 && ssum.numel() == rows * 8,
                op, ": softmaxMax and softmaxSum must be contiguous float32 of ", rows, " x 8 values");
    // innerPrecise: the software NPU always accumulates in float32, the most precise of its modes.
    const at::Tensor q = a.q, k = a.k, v = a.v;
    return Prepared{{q, k, v, a.pse, a.mask, a.sink},
                    [=]() { flashAttentionForward(setup->problem, q, k, v, out, smax, ssum, setup->stats); },
                    {out, smax, ssum}};
  });
}

struct BackwardIo {
  const aclTensor *query, *queryRope = nullptr, *key, *keyRope = nullptr, *value, *dy, *pseShift, *dropMask,
      *paddingMask, *attenMask, *softmaxMax, *softmaxSum, *softmaxIn, *attentionIn, *sink = nullptr;
  const aclIntArray *prefix, *actualSeqQLen = nullptr, *actualSeqKvLen = nullptr;
  double scaleValue, keepProb;
  int64_t preTokens, nextTokens, headNum;
  const char* inputLayout;
  int64_t innerPrecise, sparseMode, pseType = 1;
  const char* softmaxLayout = nullptr;
  aclTensor *dqOut, *dkOut, *dvOut, *dpseOut, *dsinkOut = nullptr;
};

aclnnStatus backward(const char* op, const BackwardIo& io, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    const Args a = argsOf(op, io.query, io.queryRope, io.key, io.keyRope, io.value, io.pseShift, io.dropMask,
                          io.paddingMask, io.attenMask, io.sink, io.prefix, io.actualSeqQLen, io.actualSeqKvLen,
                          io.scaleValue, io.keepProb, io.preTokens, io.nextTokens, io.headNum, io.inputLayout,
                          io.sparseMode, io.pseType, io.softmaxLayout);
    at::Tensor g = requiredTensor(io.dy, "dy");
    at::Tensor smax = requiredTensor(io.softmaxMax, "softmaxMax"), ssum = requiredTensor(io.softmaxSum, "softmaxSum");
    at::Tensor out = requiredTensor(io.attentionIn, "attentionIn");
    at::Tensor dq = requiredTensor(io.dqOut, "dq"), dk = requiredTensor(io.dkOut, "dk");
    at::Tensor dv = requiredTensor(io.dvOut, "dv");
    at::Tensor dpse = optionalTensor(io.dpseOut), dsink = optionalTensor(io.dsinkOut);
    auto setup = std::make_shared<Setup>(setUp(a));
    setup->problem.out = outputRows(*setup, a.q, out, "attentionIn");
    const RowLayout dy_rows = outputRows(*setup, a.q, g, "dy");
    TORCH_CHECK(dy_rows.seq_stride == setup->problem.out.seq_stride &&
                    dy_rows.head_stride == setup->problem.out.head_stride &&
                    dy_rows.batch_offset == setup->problem.out.batch_offset,
                op, ": dy must be laid out as attentionIn");
    TORCH_CHECK(smax.scalar_type() == at::kFloat && ssum.scalar_type() == at::kFloat && smax.is_contiguous() &&
                    ssum.is_contiguous(),
                op, ": softmaxMax and softmaxSum must be contiguous float32");
    TORCH_CHECK(dq.sizes() == a.q.sizes() && dq.strides() == a.q.strides() && dk.sizes() == a.k.sizes() &&
                    dk.strides() == a.k.strides() && dv.sizes() == a.v.sizes() && dv.strides() == a.v.strides(),
                op, ": dq / dk / dv must have the shapes and strides of query / key / value");
    TORCH_CHECK(!dpse.defined() || (a.pse.defined() && dpse.sizes() == a.pse.sizes()), op,
                ": dpse must have pse's shape");
    TORCH_CHECK(!dsink.defined() || (a.sink.defined() && dsink.scalar_type() == at::kFloat &&
                                     dsink.sizes() == a.sink.sizes() && dsink.is_contiguous()),
                op, ": dsink must be contiguous float32 of sink's shape");
    const at::Tensor q = a.q, k = a.k, v = a.v, pse = a.pse;
    return Prepared{{q, k, v, g, pse, a.mask, a.sink, smax, ssum, out},
                    [=]() mutable {
                      // The bias gradient accumulates in float32 over every (batch, head) and row the
                      // bias covers, then sums over the dimensions it broadcasts.
                      at::Tensor work;
                      AttentionProblem& p = setup->problem;
                      if (dpse.defined()) {
                        work = at::zeros({p.batch, p.q_heads, setup->pse_rows_full, pse.size(3)},
                                         at::TensorOptions().dtype(at::kFloat));
                        p.dpse_b = work.stride(0);
                        p.dpse_n = work.stride(1);
                        p.dpse_i = work.stride(2);
                        p.dpse_j = work.stride(3);
                      }
                      flashAttentionBackward(p, q, k, v, out, g, smax, ssum, setup->stats, dq, dk, dv, work, dsink);
                      if (dpse.defined()) {
                        if (pse.size(0) == 1) work = work.sum(0, true);
                        if (pse.size(1) == 1) work = work.sum(1, true);
                        if (pse.size(2) == 1) work = work.sum(2, true);
                        dpse.copy_(work);
                      }
                    },
                    {dq, dk, dv, dpse, dsink}};
  });
}

}  // namespace

// Forward, fixed sequence lengths (BSH, SBH, BSND, BNSD).
extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, aclTensor* softmaxMaxOut,
    aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .scaleValue = scaleValue, .keepProb = keepProb, .preTokens = preTokens,
               .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxMaxOut = softmaxMaxOut,
               .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionScore", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScore, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// Forward with attention sinks (and pse_type).
extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* sinkOptional, const aclIntArray* prefixOptional, const aclIntArray* qStartIdxOptional,
    const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, int64_t pseType,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .sink = sinkOptional, .prefix = prefixOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
               .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut,
               .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionScoreV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreV3, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, sinkOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// Forward, TND with cumulative sequence ends per batch.
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxMaxOut = softmaxMaxOut,
               .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScore", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScore, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// TND forward whose statistics may be laid out as the input (softmaxLayout "same_as_input").
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreV4GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode,
    char* softmaxLayout, aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut,
    aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .key = key, .value = value, .realShift = realShiftOptional,
               .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxLayout = softmaxLayout,
               .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut, .softmaxOutOut = softmaxOutOut,
               .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScoreV4", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScoreV4, "query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, softmaxLayout, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

// TND forward with attention sinks.
extern "C" NOP_API aclnnStatus aclnnFlashAttentionVarLenScoreV5GetWorkspaceSize(
    const aclTensor* query, const aclTensor* queryRopeOptional, const aclTensor* key,
    const aclTensor* keyRopeOptional, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* sinkOptional, const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, const aclIntArray* qStartIdxOptional,
    const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, int64_t pseType,
    char* softmaxLayout, aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut,
    aclTensor* attentionOutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  ForwardIo io{.query = query, .queryRope = queryRopeOptional, .key = key, .keyRope = keyRopeOptional,
               .value = value, .realShift = realShiftOptional, .dropMask = dropMaskOptional,
               .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional, .sink = sinkOptional,
               .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
               .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
               .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
               .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
               .softmaxLayout = softmaxLayout, .softmaxMaxOut = softmaxMaxOut, .softmaxSumOut = softmaxSumOut,
               .softmaxOutOut = softmaxOutOut, .attentionOutOut = attentionOutOut};
  return forward("aclnnFlashAttentionVarLenScoreV5", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionVarLenScoreV5, "query, queryRopeOptional, key, keyRopeOptional, value, realShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, sinkOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxLayout, softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut,
    aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .scaleValue = scaleValue,
                .keepProb = keepProb, .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum,
                .inputLayout = inputLayout, .innerPrecise = innerPrecise, .sparseMode = sparseMode, .dqOut = dqOut,
                .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionScoreGrad", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreGrad, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionScoreGradV3GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclTensor* sinkOptional,
    const aclIntArray* prefixOptional, const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, int64_t pseType, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut,
    aclTensor* dpseOut, aclTensor* dsinkOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .sink = sinkOptional, .prefix = prefixOptional,
                .scaleValue = scaleValue, .keepProb = keepProb, .preTokens = preTokens, .nextTokens = nextTokens,
                .headNum = headNum, .inputLayout = inputLayout, .innerPrecise = innerPrecise,
                .sparseMode = sparseMode, .pseType = pseType, .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut,
                .dpseOut = dpseOut, .dsinkOut = dsinkOut};
  return backward("aclnnFlashAttentionScoreGradV3", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionScoreGradV3, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, sinkOptional, prefixOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, dqOut, dkOut, dvOut, dpseOut, dsinkOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut, aclTensor* dpseOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .dqOut = dqOut, .dkOut = dkOut,
                .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGrad", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGrad, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV4GetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, aclTensor* dqOut, aclTensor* dkOut, aclTensor* dvOut, aclTensor* dpseOut, char* softmaxLayout,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .key = key, .value = value, .dy = dy, .pseShift = pseShiftOptional,
                .dropMask = dropMaskOptional, .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional,
                .softmaxMax = softmaxMaxOptional, .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional,
                .attentionIn = attentionInOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .softmaxLayout = softmaxLayout,
                .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGradV4", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGradV4, "query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut, softmaxLayout");

extern "C" NOP_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize(
    const aclTensor* query, const aclTensor* queryRopeOptional, const aclTensor* key,
    const aclTensor* keyRopeOptional, const aclTensor* value, const aclTensor* dy, const aclTensor* pseShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional, const aclTensor* softmaxInOptional,
    const aclTensor* attentionInOptional, const aclTensor* sinkOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional,
    const aclIntArray* qStartIdxOptional, const aclIntArray* kvStartIdxOptional, double scaleValue, double keepProb,
    int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise,
    int64_t sparseMode, int64_t pseType, char* softmaxLayout, aclTensor* dqOut, aclTensor* dqRopeOut,
    aclTensor* dkOut, aclTensor* dkRopeOut, aclTensor* dvOut, aclTensor* dpseOut, aclTensor* dsinkOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  BackwardIo io{.query = query, .queryRope = queryRopeOptional, .key = key, .keyRope = keyRopeOptional,
                .value = value, .dy = dy, .pseShift = pseShiftOptional, .dropMask = dropMaskOptional,
                .paddingMask = paddingMaskOptional, .attenMask = attenMaskOptional, .softmaxMax = softmaxMaxOptional,
                .softmaxSum = softmaxSumOptional, .softmaxIn = softmaxInOptional, .attentionIn = attentionInOptional,
                .sink = sinkOptional, .prefix = prefixOptional, .actualSeqQLen = actualSeqQLenOptional,
                .actualSeqKvLen = actualSeqKvLenOptional, .scaleValue = scaleValue, .keepProb = keepProb,
                .preTokens = preTokens, .nextTokens = nextTokens, .headNum = headNum, .inputLayout = inputLayout,
                .innerPrecise = innerPrecise, .sparseMode = sparseMode, .pseType = pseType,
                .softmaxLayout = softmaxLayout, .dqOut = dqOut, .dkOut = dkOut, .dvOut = dvOut, .dpseOut = dpseOut,
                .dsinkOut = dsinkOut};
  return backward("aclnnFlashAttentionUnpaddingScoreGradV5", io, workspaceSize, executor);
}
NPU_ATEN_OP(FlashAttentionUnpaddingScoreGradV5, "query, queryRopeOptional, key, keyRopeOptional, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional, sinkOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxLayout, dqOut, dqRopeOut, dkOut, dkRopeOut, dvOut, dpseOut, dsinkOut");

// The dropout mask of FlashAttentionScore: `shape`'s element count of bits (1 = keep), each 0 with
// probability `prob` (the probability of dropping, as CANN's op takes it), a function of (seed,
// offset) only.
extern "C" NOP_API aclnnStatus aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray* shape, double prob, int64_t seed,
                                                                     int64_t offset, int64_t probDataType,
                                                                     aclTensor* out, uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutGenMaskV2", workspaceSize, executor, [&] {
    const std::vector<int64_t> dims = intArray(shape);
    at::Tensor o = requiredTensor(out, "out");
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    TORCH_CHECK(o.scalar_type() == at::kByte && o.is_contiguous() && o.numel() * 8 >= numel,
                "aclnnDropoutGenMaskV2: out must be contiguous uint8 with at least ", (numel + 7) / 8, " bytes");
    TORCH_CHECK(prob >= 0.0 && prob <= 1.0, "aclnnDropoutGenMaskV2: prob must be in [0, 1], got ", prob);
    (void)probDataType;
    return Prepared{{}, [=]() mutable {
                      dropoutGenMask(static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), 1.0 - prob, numel,
                                     static_cast<uint8_t*>(o.data_ptr()));
                    }, {o}};
  });
}
NPU_ATEN_OP(DropoutGenMaskV2, "shape, prob, seed, offset, probDataType, out");

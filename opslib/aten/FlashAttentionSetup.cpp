// FlashAttentionSetup.cpp - what the FlashAttention device ops share: the sizes and row layouts of
// each input layout, and the mask rule, bias, sinks, dropout and statistics layout of a call.
#include "FlashAttentionSetup.h"

#include <algorithm>

namespace npu::opslib::aten::fa {

// pre / next tokens at INT32_MAX or beyond mean "no limit", as torch_npu's defaults (2147483647) do.
static int64_t tokens(int64_t value) { return value >= 2147483647 ? INT64_MAX : value; }

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
static Shapes shapesOf(const char* op, const std::string& layout, const at::Tensor& q, const at::Tensor& k,
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
    s.q_pad = q.size(sdim);
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
    s.q_pad = q.size(sdim);
  }
  TORCH_CHECK(k.size(-1) == (layout == "BSH" || layout == "SBH" ? s.kv_heads * s.d : s.d), op,
              ": key and query must have one head size");
  TORCH_CHECK(s.dv > 0, op, ": the value's head size must be positive, got ", v.sizes());
  p->q = rowsOf(layout, q, s.d, s.batch, s.q_start);
  p->k = rowsOf(layout, k, s.d, s.batch, s.kv_start);
  p->v = rowsOf(layout, v, s.dv, s.batch, s.kv_start);
  return s;
}



// The first / last batch with a non-empty sequence (sparse modes 8 / 7 put the band there).
static int64_t firstNonEmpty(const Shapes& s, bool last) {
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
  Shapes s = shapesOf(op, a.layout, q, k, v, a.head_num, a.cum_q, a.cum_kv, &p);
  // Valid lengths inside padded batches (one value: every batch's).
  auto valid = [&](const std::vector<int64_t>& lengths, std::vector<int64_t>& len, const char* what) {
    if (lengths.empty()) return;
    TORCH_CHECK(lengths.size() == 1 || static_cast<int64_t>(lengths.size()) >= s.batch, op, ": ", what,
                " has ", lengths.size(), " values for ", s.batch, " batches (give 1 or one per batch)");
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t n = lengths.size() == 1 ? lengths[0] : lengths[b];
      TORCH_CHECK(n >= 0 && n <= len[b], op, ": ", what, " ", n, " of batch ", b, " is not within [0, ", len[b], "]");
      len[b] = n;
    }
  };
  valid(a.actual_q, s.q_len, "actual_seq_lengths");
  valid(a.actual_kv, s.kv_len, "actual_seq_lengths_kv");
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
    const at::Tensor& mask = a.mask;
    const int64_t max_q = *std::max_element(s.q_len.begin(), s.q_len.end());
    const int64_t max_kv = *std::max_element(s.kv_len.begin(), s.kv_len.end());
    TORCH_CHECK(mask.dim() == 2 || mask.dim() == 4, op,
                ": atten_mask must be [Sq, Skv], [B, 1, Sq, Skv] or [B, N, Sq, Skv], got ", mask.sizes());
    TORCH_CHECK(mask.size(-2) >= max_q && mask.size(-1) >= max_kv, op, ": atten_mask ", mask.sizes(),
                " is smaller than the scores (", max_q, " x ", max_kv, ")");
    if (mask.dim() == 4) {
      TORCH_CHECK((mask.size(0) == 1 || mask.size(0) == s.batch) && (mask.size(1) == 1 || mask.size(1) == s.q_heads),
                  op, ": atten_mask ", mask.sizes(), " does not match batch ", s.batch, " and heads ", s.q_heads);
    }
    m.explicit_mask = mask;  // bound (as bytes) when the kernel runs: bind()
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
    p.pse = pse;  // bound (as float32) when the kernel runs: bind()
    p.pse_rows = compressed ? 1024 : 0;
    setup.pse_rows_full = compressed ? 1024 : max_q;
    TORCH_CHECK(a.pse_type == 0 || a.pse_type == 1, op, ": pse_type must be 0 (pse added after scaling) or 1 ",
                "(before), got ", a.pse_type);
    p.pse_scale = a.pse_type == 1 ? static_cast<float>(a.scale) : 1.0f;
  }

  if (a.sink.defined()) {
    TORCH_CHECK(a.sink.dim() == 1 && a.sink.size(0) == s.q_heads, op, ": sink must be [head_num] (", s.q_heads,
                "), got ", a.sink.sizes());
    setup.sink_src = a.sink;  // bound (as float32) when the kernel runs: bind()
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

  // softmax_max / softmax_sum: [B, N, Sq, lanes]; TND: [T, N, lanes], N-major in memory unless the
  // statistics are laid out as the input (softmax_layout "TND" / "same_as_input").
  StatsLayout& st = setup.stats;
  const int64_t lanes = st.lanes = a.stats_lanes;
  if (varlen) {
    TORCH_CHECK(a.softmax_layout.empty() || a.softmax_layout == "same_as_input", op,
                ": softmaxLayout must be empty or \"same_as_input\", got '", a.softmax_layout, "'");
    const int64_t t = q.size(0);
    if (a.softmax_layout.empty()) {
      st.head_stride = t * lanes;
      st.seq_stride = lanes;
      for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(s.q_start[b] * lanes);
    } else {
      st.head_stride = lanes;
      st.seq_stride = s.q_heads * lanes;
      for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(s.q_start[b] * st.seq_stride);
    }
  } else {
    st.seq_stride = lanes;
    st.head_stride = s.q_pad * lanes;
    for (int64_t b = 0; b < s.batch; ++b) st.batch_offset.push_back(b * s.q_heads * s.q_pad * lanes);
  }
  return setup;
}

void bind(Setup& setup) {
  AttentionProblem& p = setup.problem;
  MaskRule& m = p.mask;
  if (m.explicit_mask.defined()) {
    const at::Tensor& given = m.explicit_mask;
    const at::Tensor mask = given.scalar_type() == at::kBool || given.scalar_type() == at::kByte ? given : given.ne(0);
    m.explicit_mask = mask;
    m.mask_i = mask.stride(-2);
    m.mask_j = mask.stride(-1);
    if (mask.dim() == 4) {
      m.mask_b = mask.size(0) == 1 ? 0 : mask.stride(0);
      m.mask_n = mask.size(1) == 1 ? 0 : mask.stride(1);
    }
  }
  if (p.pse.defined()) {
    const at::Tensor pse = p.pse.scalar_type() == at::kFloat ? p.pse : p.pse.to(at::kFloat);
    p.pse = pse;
    p.pse_b = pse.size(0) == 1 ? 0 : pse.stride(0);
    p.pse_n = pse.size(1) == 1 ? 0 : pse.stride(1);
    p.pse_i = pse.size(2) == 1 ? 0 : pse.stride(2);
    p.pse_j = pse.stride(3);
  }
  if (setup.sink_src.defined()) {
    setup.sink_float = setup.sink_src.to(at::kFloat).contiguous();
    p.sink = setup.sink_float.const_data_ptr<float>();
  }
}

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

at::Tensor optionalTensor(const aclTensor* t) {
  at::Tensor x = hostTensor(t);
  return x.defined() && x.numel() > 0 ? x : at::Tensor();
}
at::Tensor optionalTensor(aclTensor* t) { return optionalTensor(static_cast<const aclTensor*>(t)); }

}  // namespace npu::opslib::aten::fa

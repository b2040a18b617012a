// MiscMoreOps.cpp - device ops aclnnQuantConvolution (int8 convolution dequantised per channel),
// aclnnAttentionLnQKV (layer norm, then the query / key / value projections split into heads) and
// aclnnHansEncode / aclnnHansDecode (lossless compression of float tensors by their exponent-byte statistics).
//
// Integer convolutions are exact (double holds every int8 x int8 sum these shapes reach) and dequantised in
// float32, as the cube units accumulate; norms and projections accumulate in float32.
#include <ATen/TensorOperators.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rsqrt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantPacking.h"

using namespace npu::opslib::aten;
using npu::opslib::aten::quant::unpackScale;

namespace {

bool isFloatType(at::ScalarType t) { return t == at::kHalf || t == at::kFloat || t == at::kBFloat16; }

// ---- HANS format -------------------------------------------------------------------------------------------------
// Each element of b bits splits into its exponent byte (the 8 bits below the sign: bits b-2 .. b-9; the exact
// exponent of float32 and bfloat16, the 5 exponent and 3 top mantissa bits of float16) and its mantissa part (the
// sign above the low b-9 bits, b-8 bits = element_size - 1 bytes, little-endian, element after element).
// The exponent bytes are coded against pdf: symbols ranked by count (descending, ties by value), then every block of
// 64 ranks is stored as one width byte w (bits of the block's largest rank) and 64 ranks of w bits, LSB first:
// at most 65 bytes a block, so the stream never exceeds numel + numel / 64 bytes.
// fixed starts with a kHansHeader-byte header; the stream follows it in fixed and, with reshuff false, continues at
// the start of var once fixed is full; with reshuff true it lies wholly in fixed (var is untouched).
constexpr int64_t kHansHeader = 512;
constexpr int64_t kHansBlock = 64;
constexpr int64_t kHansMinElements = 32768;
constexpr int64_t kHansCoreReserve = 8448;  // per vector core in upstream's bound; the software NPU has one core
constexpr uint32_t kHansMagic = 0x534E4148;  // "HANS"

int64_t byteSize(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

int64_t hansBound(int64_t numel) { return numel + numel / kHansBlock + kHansCoreReserve; }

struct HansHeader {
  uint32_t magic;
  uint32_t element_size;
  int64_t numel;
  int64_t stream_bytes;
  int64_t bytes_in_fixed;  // of the stream, after the header
  uint64_t pdf_hash;
  uint32_t reshuff;
};

uint64_t pdfHash(const int32_t* pdf) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a over the 256 counts
  for (int i = 0; i < 256; ++i) {
    uint32_t v = static_cast<uint32_t>(pdf[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= (v >> (8 * b)) & 0xFF;
      h *= 1099511628211ULL;
    }
  }
  return h;
}

// rank[symbol]: position of the symbol in the counts sorted descending (ties by symbol).
std::array<uint8_t, 256> hansRanks(const int32_t* pdf, std::array<uint8_t, 256>* symbols) {
  std::array<int, 256> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pdf[a] > pdf[b]; });
  std::array<uint8_t, 256> rank{};
  for (int r = 0; r < 256; ++r) {
    rank[order[r]] = static_cast<uint8_t>(r);
    if (symbols != nullptr) (*symbols)[r] = static_cast<uint8_t>(order[r]);
  }
  return rank;
}

uint64_t loadBits(const uint8_t* p, int64_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(size));  // little-endian host
  return v;
}

void checkHansPdf(const char* op, const at::Tensor& pdf) {
  TORCH_CHECK(pdf.scalar_type() == at::kInt && pdf.numel() == 256 && (pdf.dim() == 1 || pdf.dim() == 2), op,
              ": pdf must be int32 of shape (1, 256) (or (256,)), got ", pdf.scalar_type(), " ", pdf.sizes());
}

void checkHansData(const char* op, const char* what, const at::Tensor& data, const at::Tensor& mantissa,
                   const at::Tensor& fixed, const at::Tensor& var) {
  TORCH_CHECK(isFloatType(data.scalar_type()), op, ": ", what, " must be float16, float32 or bfloat16, got ",
              data.scalar_type());
  for (const auto& [name, t] : {std::make_pair("mantissa", &mantissa), std::make_pair("fixed", &fixed),
                                std::make_pair("var", &var)}) {
    TORCH_CHECK(t->scalar_type() == data.scalar_type(), op, ": ", name, " must have ", what, "'s dtype ",
                data.scalar_type(), ", got ", t->scalar_type());
  }
  const int64_t n = data.numel();
  TORCH_CHECK(n % kHansBlock == 0 && n >= kHansMinElements, op, ": ", what,
              " must have a multiple of 64 elements, at least 32768, got ", n);
  TORCH_CHECK(byteSize(mantissa) == n * (data.element_size() - 1), op, ": mantissa must hold ", what,
              ".numel() * (element_size - 1) = ", n * (data.element_size() - 1), " bytes, got ", byteSize(mantissa));
  TORCH_CHECK(byteSize(fixed) >= kHansHeader, op, ": fixed must hold at least ", kHansHeader,
              " bytes (the header), got ", byteSize(fixed));
}

// A contiguous tensor to write bytes into: the tensor itself, or a copy stored back by finishBytes.
at::Tensor bytesOf(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void finishBytes(at::Tensor& t, const at::Tensor& bytes) {
  if (!bytes.is_same(t)) t.copy_(bytes);
}

}  // namespace

// output[n, co] = (conv(input padded with offsetX, weight)[n, co] [+ bias[co]]) * scale[co], the int32 accumulator
// converted to float32 before the scale, rounded once to output's dtype. scale is float32 or the int64 packed form.
extern "C" NOP_API aclnnStatus aclnnQuantConvolutionGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* biasOptional, const aclTensor* scale,
    const aclTensor* offsetOptional, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, bool transposed, const aclIntArray* outputPadding, int64_t groups, int64_t offsetX,
    char* roundMode, aclTensor* output, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantConvolution", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantConvolution";
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor sc = requiredTensor(scale, "scale"), bi = hostTensor(biasOptional), o = requiredTensor(output, "output");
    TORCH_CHECK(!hostTensor(offsetOptional).defined(), op, ": offset is not supported; pass NULL");
    TORCH_CHECK(!transposed && intArray(outputPadding).empty(), op,
                ": transposed quantized convolution is not supported (transposed false, outputPadding empty)");
    const std::string mode = roundMode == nullptr ? "rint" : roundMode;
    TORCH_CHECK(mode == "rint", op, ": roundMode must be \"rint\", got \"", mode, "\"");
    TORCH_CHECK(x.scalar_type() == at::kChar && w.scalar_type() == at::kChar, op,
                ": input and weight must be int8, got ", x.scalar_type(), " and ", w.scalar_type());
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4, op, ": input and weight must be 4-D NCHW, got ", x.sizes(), " and ",
                w.sizes());
    const std::vector<int64_t> st = intArray(stride), pd = intArray(padding), dl = intArray(dilation);
    TORCH_CHECK(st.size() == 2 && pd.size() == 2 && dl.size() == 2, op,
                ": stride, padding and dilation must have 2 elements each");
    TORCH_CHECK(st[0] > 0 && st[1] > 0 && dl[0] > 0 && dl[1] > 0 && pd[0] >= 0 && pd[1] >= 0, op,
                ": stride and dilation must be positive, padding non-negative");
    const int64_t co = w.size(0);
    TORCH_CHECK(groups > 0 && x.size(1) % groups == 0 && co % groups == 0 && w.size(1) * groups == x.size(1), op,
                ": groups ", groups, " does not fit input channels ", x.size(1), " and weight ", w.sizes());
    TORCH_CHECK(offsetX >= -128 && offsetX <= 127, op, ": offsetX is an int8 padding value, got ", offsetX);
    TORCH_CHECK((sc.scalar_type() == at::kFloat || sc.scalar_type() == at::kLong) && sc.dim() == 1 &&
                    (sc.size(0) == co || sc.size(0) == 1),
                op, ": scale must be float32 or int64 of shape (", co, ",) or (1,), got ", sc.scalar_type(), " ",
                sc.sizes());
    TORCH_CHECK(!bi.defined() || (bi.scalar_type() == at::kInt && bi.dim() == 1 && bi.size(0) == co), op,
                ": bias must be int32 of shape (", co, ",)");
    const int64_t ho = (x.size(2) + 2 * pd[0] - dl[0] * (w.size(2) - 1) - 1) / st[0] + 1;
    const int64_t wo = (x.size(3) + 2 * pd[1] - dl[1] * (w.size(3) - 1) - 1) / st[1] + 1;
    TORCH_CHECK(ho > 0 && wo > 0, op, ": the output would be empty");
    const std::vector<int64_t> out_shape{x.size(0), co, ho, wo};
    TORCH_CHECK(isFloatType(o.scalar_type()) && o.sizes().equals(out_shape), op,
                ": output must be float16, bfloat16 or float32 of shape (", x.size(0), ", ", co, ", ", ho, ", ", wo,
                "), got ", o.scalar_type(), " ", o.sizes());
    return Prepared{{x, w, sc, bi}, [=]() mutable {
                      // The padding ring holds offsetX, not zero (upstream's documented fill value).
                      at::Tensor xi = at::constant_pad_nd(x.to(at::kDouble), {pd[1], pd[1], pd[0], pd[0]},
                                                          static_cast<double>(offsetX));
                      at::Tensor acc = at::convolution(xi, w.to(at::kDouble), std::nullopt, st, {0, 0}, dl, false,
                                                       {0, 0}, groups);
                      if (bi.defined()) acc = acc + bi.to(at::kDouble).reshape({1, co, 1, 1});
                      const at::Tensor s = sc.scalar_type() == at::kLong ? unpackScale(sc) : sc;
                      const at::Tensor v = acc.to(at::kFloat) * s.to(at::kFloat).reshape({1, -1, 1, 1});
                      o.copy_(v.to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(QuantConvolution, "input, weight, biasOptional, scale, offsetOptional, stride, padding, dilation, transposed, outputPadding, groups, offsetX, roundMode, output");

// norm = layer_norm(x) over the hidden size (float32 statistics, rounded to x's dtype); q/k/v = norm @ kernel
// [+ bias] (float32 accumulation) reshaped (B, S, N, D) and stored (B, N, S, D); mean and the biased variance per row.
extern "C" NOP_API aclnnStatus aclnnAttentionLnQKVGetWorkspaceSize(
    const aclTensor* x, const aclTensor* kernelQuery, const aclTensor* kernelKey, const aclTensor* kernelValue,
    const aclTensor* gamma, const aclTensor* beta, const aclTensor* biasQueryOptional,
    const aclTensor* biasKeyOptional, const aclTensor* biasValueOptional, int64_t seqLen, int64_t numHeads,
    double epsilon, aclTensor* normOut, aclTensor* queryOut, aclTensor* keyOut, aclTensor* valueOut,
    aclTensor* meanOut, aclTensor* varianceOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAttentionLnQKV", workspaceSize, executor, [&] {
    const char* op = "aclnnAttentionLnQKV";
    at::Tensor xt = requiredTensor(x, "x");
    std::vector<at::Tensor> kernels{requiredTensor(kernelQuery, "kernelQuery"), requiredTensor(kernelKey, "kernelKey"),
                                    requiredTensor(kernelValue, "kernelValue")};
    std::vector<at::Tensor> biases{hostTensor(biasQueryOptional), hostTensor(biasKeyOptional),
                                   hostTensor(biasValueOptional)};
    at::Tensor g = requiredTensor(gamma, "gamma"), b = requiredTensor(beta, "beta");
    at::Tensor norm = requiredTensor(normOut, "normOut"), mean = requiredTensor(meanOut, "meanOut");
    at::Tensor variance = requiredTensor(varianceOut, "varianceOut");
    std::vector<at::Tensor> heads{requiredTensor(queryOut, "queryOut"), requiredTensor(keyOut, "keyOut"),
                                  requiredTensor(valueOut, "valueOut")};
    TORCH_CHECK(isFloatType(xt.scalar_type()) && xt.dim() == 2, op,
                ": x must be 2-D float16, float32 or bfloat16, got ", xt.scalar_type(), " ", xt.sizes());
    TORCH_CHECK(seqLen > 0 && numHeads > 0, op, ": seqLen and numHeads must be positive");
    const int64_t rows = xt.size(0), hidden = xt.size(1);
    TORCH_CHECK(rows % seqLen == 0 && hidden % numHeads == 0, op, ": x ", xt.sizes(),
                " must split into seqLen = ", seqLen, " rows and numHeads = ", numHeads, " heads");
    TORCH_CHECK(epsilon > 0, op, ": epsilon must be positive, got ", epsilon);
    for (const at::Tensor& k : kernels) {
      TORCH_CHECK(k.scalar_type() == xt.scalar_type() && k.dim() == 2 && k.size(0) == hidden && k.size(1) == hidden,
                  op, ": the kernels must be (", hidden, ", ", hidden, ") of x's dtype, got ", k.scalar_type(), " ",
                  k.sizes());
    }
    for (const at::Tensor& v : {g, b, biases[0], biases[1], biases[2]}) {
      TORCH_CHECK(!v.defined() || (v.scalar_type() == xt.scalar_type() && v.dim() == 1 && v.size(0) == hidden), op,
                  ": gamma, beta and the biases must be (", hidden, ",) of x's dtype");
    }
    const std::vector<int64_t> head_shape{rows / seqLen, numHeads, seqLen, hidden / numHeads};
    TORCH_CHECK(norm.sizes().equals(xt.sizes()) && norm.scalar_type() == xt.scalar_type(), op,
                ": normOut must be like x");
    for (const at::Tensor& h : heads) {
      TORCH_CHECK(h.sizes().equals(head_shape) && h.scalar_type() == xt.scalar_type(), op,
                  ": queryOut, keyOut and valueOut must be ", at::IntArrayRef(head_shape), " of x's dtype");
    }
    const std::vector<int64_t> row_shape{rows};
    TORCH_CHECK(mean.sizes().equals(row_shape) && variance.sizes().equals(row_shape) &&
                    isFloatType(mean.scalar_type()) &&
                    isFloatType(variance.scalar_type()),
                op, ": meanOut and varianceOut must be floating (", rows, ",)");
    return Prepared{{xt, kernels[0], kernels[1], kernels[2], g, b, biases[0], biases[1], biases[2]},
                    [=]() mutable {
                      const at::Tensor xf = xt.to(at::kFloat);
                      const at::Tensor mu = xf.mean({-1}, /*keepdim=*/true);
                      const at::Tensor centered = xf - mu;
                      const at::Tensor var = (centered * centered).mean({-1}, /*keepdim=*/true);
                      const at::Tensor y = centered * at::rsqrt(var + epsilon) * g.to(at::kFloat) + b.to(at::kFloat);
                      norm.copy_(y.to(norm.scalar_type()));
                      mean.copy_(mu.reshape({rows}).to(mean.scalar_type()));
                      variance.copy_(var.reshape({rows}).to(variance.scalar_type()));
                      // The projections read the stored (rounded) norm, as the fused kernel's second stage does.
                      const at::Tensor nf = norm.to(at::kFloat);
                      for (int i = 0; i < 3; ++i) {
                        at::Tensor p = at::matmul(nf, kernels[i].to(at::kFloat));
                        if (biases[i].defined()) p = p + biases[i].to(at::kFloat);
                        heads[i].copy_(p.to(heads[i].scalar_type())
                                           .reshape({rows / seqLen, seqLen, numHeads, hidden / numHeads})
                                           .permute({0, 2, 1, 3}));
                      }
                    },
                    {norm, heads[0], heads[1], heads[2], mean, variance}};
  });
}
NPU_ATEN_OP(AttentionLnQKV, "x, kernelQuery, kernelKey, kernelValue, gamma, beta, biasQueryOptional, biasKeyOptional, biasValueOptional, seqLen, numHeads, epsilon, normOut, queryOut, keyOut, valueOut, meanOut, varianceOut");

// Encodes input into mantissa, fixed and var (the format described above); with statistic, first counts input's
// exponent bytes into pdf, otherwise codes against the pdf given.
extern "C" NOP_API aclnnStatus aclnnHansEncodeGetWorkspaceSize(const aclTensor* input, aclTensor* pdfRef,
                                                              bool statistic, bool reshuff, aclTensor* mantissaOut,
                                                              aclTensor* fixedOut, aclTensor* varOut,
                                                              uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnHansEncode", workspaceSize, executor, [&] {
    const char* op = "aclnnHansEncode";
    at::Tensor in = requiredTensor(input, "input"), pdf = requiredTensor(pdfRef, "pdf");
    at::Tensor man = requiredTensor(mantissaOut, "mantissa"), fix = requiredTensor(fixedOut, "fixed");
    at::Tensor vr = requiredTensor(varOut, "var");
    checkHansPdf(op, pdf);
    checkHansData(op, "input", in, man, fix, vr);
    const int64_t n = in.numel(), bound = hansBound(n);
    TORCH_CHECK(byteSize(fix) + byteSize(vr) >= bound, op, ": fixed and var together must hold at least numel + "
                "numel / 64 + 8448 = ", bound, " bytes, got ", byteSize(fix) + byteSize(vr));
    TORCH_CHECK(!reshuff || byteSize(fix) >= bound, op, ": with reshuff fixed alone must hold at least ", bound,
                " bytes, got ", byteSize(fix));
    return Prepared{{in, pdf}, [=]() mutable {
                      const int64_t es = in.element_size(), bits = 8 * es, shift = bits - 9;
                      const uint64_t low_mask = (uint64_t{1} << shift) - 1;
                      const at::Tensor src = in.contiguous();
                      const auto* raw = static_cast<const uint8_t*>(src.const_data_ptr());
                      std::vector<uint8_t> expo(static_cast<size_t>(n));
                      at::Tensor man_b = bytesOf(man);
                      auto* mp = static_cast<uint8_t*>(man_b.mutable_data_ptr());
                      for (int64_t i = 0; i < n; ++i) {
                        const uint64_t v = loadBits(raw + i * es, es);
                        expo[i] = static_cast<uint8_t>((v >> shift) & 0xFF);
                        const uint64_t m = ((v >> (bits - 1)) << shift) | (v & low_mask);
                        std::memcpy(mp + i * (es - 1), &m, static_cast<size_t>(es - 1));
                      }
                      finishBytes(man, man_b);
                      at::Tensor pdf_b = bytesOf(pdf);
                      int32_t* counts = pdf_b.mutable_data_ptr<int32_t>();
                      if (statistic) {
                        std::fill(counts, counts + 256, 0);
                        for (uint8_t e : expo) ++counts[e];
                        finishBytes(pdf, pdf_b);
                      }
                      const std::array<uint8_t, 256> rank = hansRanks(counts, nullptr);
                      // The stream: per block a width byte, then 64 ranks of that width, LSB first.
                      std::vector<uint8_t> stream;
                      stream.reserve(static_cast<size_t>(n + n / kHansBlock));
                      for (int64_t blk = 0; blk < n; blk += kHansBlock) {
                        int maxr = 0;
                        for (int64_t i = blk; i < blk + kHansBlock; ++i) maxr = std::max<int>(maxr, rank[expo[i]]);
                        int width = 0;
                        while ((1 << width) <= maxr) ++width;
                        stream.push_back(static_cast<uint8_t>(width));
                        const size_t base = stream.size();
                        stream.resize(base + static_cast<size_t>(8 * width), 0);
                        for (int64_t i = 0; i < kHansBlock && width > 0; ++i) {
                          const int r = rank[expo[blk + i]];
                          for (int b = 0; b < width; ++b) {
                            const int64_t pos = i * width + b;
                            if ((r >> b) & 1) stream[base + pos / 8] |= static_cast<uint8_t>(1u << (pos % 8));
                          }
                        }
                      }
                      at::Tensor fix_b = bytesOf(fix), var_b = bytesOf(vr);
                      auto* fp = static_cast<uint8_t*>(fix_b.mutable_data_ptr());
                      auto* vp = static_cast<uint8_t*>(var_b.mutable_data_ptr());
                      const int64_t total = static_cast<int64_t>(stream.size());
                      const int64_t in_fixed = std::min(total, byteSize(fix) - kHansHeader);
                      HansHeader h{kHansMagic, static_cast<uint32_t>(es), n, total, in_fixed, pdfHash(counts),
                                   reshuff ? 1u : 0u};
                      std::memset(fp, 0, kHansHeader);
                      std::memcpy(fp, &h, sizeof(h));
                      std::memcpy(fp + kHansHeader, stream.data(), static_cast<size_t>(in_fixed));
                      if (total > in_fixed) {
                        std::memcpy(vp, stream.data() + in_fixed, static_cast<size_t>(total - in_fixed));
                      }
                      finishBytes(fix, fix_b);
                      finishBytes(vr, var_b);
                    },
                    {pdf, man, fix, vr}};
  });
}
NPU_ATEN_OP(HansEncode, "input, pdfRef, statistic, reshuff, mantissaOut, fixedOut, varOut");

// Rebuilds out bit for bit from what aclnnHansEncode wrote, given the same pdf and reshuff.
extern "C" NOP_API aclnnStatus aclnnHansDecodeGetWorkspaceSize(const aclTensor* mantissa, const aclTensor* fixed,
                                                              const aclTensor* var, const aclTensor* pdf,
                                                              bool reshuff, aclTensor* out, uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnHansDecode", workspaceSize, executor, [&] {
    const char* op = "aclnnHansDecode";
    at::Tensor man = requiredTensor(mantissa, "mantissa"), fix = requiredTensor(fixed, "fixed");
    at::Tensor vr = requiredTensor(var, "var"), pd = requiredTensor(pdf, "pdf"), o = requiredTensor(out, "out");
    checkHansPdf(op, pd);
    checkHansData(op, "out", o, man, fix, vr);
    return Prepared{{man, fix, vr, pd}, [=]() mutable {
                      const int64_t n = o.numel(), es = o.element_size(), bits = 8 * es, shift = bits - 9;
                      const at::Tensor fc = fix.contiguous(), vc = vr.contiguous(), mc = man.contiguous();
                      const at::Tensor pc = pd.contiguous();
                      const auto* fp = static_cast<const uint8_t*>(fc.const_data_ptr());
                      const auto* vp = static_cast<const uint8_t*>(vc.const_data_ptr());
                      const auto* mp = static_cast<const uint8_t*>(mc.const_data_ptr());
                      HansHeader h;
                      std::memcpy(&h, fp, sizeof(h));
                      TORCH_CHECK(h.magic == kHansMagic, op, ": fixed holds no npu_hans_encode result");
                      TORCH_CHECK(h.element_size == static_cast<uint32_t>(es) && h.numel == n, op,
                                  ": the data was encoded from ", h.numel, " elements of ", h.element_size,
                                  " bytes; out has ", n, " of ", es);
                      TORCH_CHECK(h.reshuff == (reshuff ? 1u : 0u), op, ": the data was encoded with reshuff=",
                                  h.reshuff ? "True" : "False", "; pass the same reshuff to decode");
                      const int32_t* counts = pc.const_data_ptr<int32_t>();
                      TORCH_CHECK(h.pdf_hash == pdfHash(counts), op,
                                  ": pdf is not the one the data was encoded with");
                      const int64_t fixed_cap = byteSize(fix) - kHansHeader;
                      TORCH_CHECK(h.bytes_in_fixed >= 0 && h.bytes_in_fixed <= fixed_cap &&
                                      h.stream_bytes >= h.bytes_in_fixed &&
                                      h.stream_bytes - h.bytes_in_fixed <= (reshuff ? 0 : byteSize(vr)),
                                  op, ": fixed / var are smaller than the encoded data");
                      std::vector<uint8_t> stream(static_cast<size_t>(h.stream_bytes));
                      std::memcpy(stream.data(), fp + kHansHeader, static_cast<size_t>(h.bytes_in_fixed));
                      std::memcpy(stream.data() + h.bytes_in_fixed, vp,
                                  static_cast<size_t>(h.stream_bytes - h.bytes_in_fixed));
                      std::array<uint8_t, 256> symbols{};
                      hansRanks(counts, &symbols);
                      at::Tensor ob = bytesOf(o);
                      auto* op_bytes = static_cast<uint8_t*>(ob.mutable_data_ptr());
                      const uint64_t low_mask = (uint64_t{1} << shift) - 1;
                      size_t pos = 0;
                      for (int64_t blk = 0; blk < n; blk += kHansBlock) {
                        TORCH_CHECK(pos < stream.size(), op, ": the encoded stream is truncated");
                        const int width = stream[pos++];
                        TORCH_CHECK(width <= 8 && pos + static_cast<size_t>(8 * width) <= stream.size(), op,
                                    ": the encoded stream is corrupt");
                        for (int64_t i = 0; i < kHansBlock; ++i) {
                          int r = 0;
                          for (int b = 0; b < width; ++b) {
                            const int64_t bit = i * width + b;
                            r |= ((stream[pos + bit / 8] >> (bit % 8)) & 1) << b;
                          }
                          const int64_t e = blk + i;
                          const uint64_t m = loadBits(mp + e * (es - 1), es - 1);
                          const uint64_t v = ((m >> shift) << (bits - 1)) |
                                             (static_cast<uint64_t>(symbols[r]) << shift) | (m & low_mask);
                          std::memcpy(op_bytes + e * es, &v, static_cast<size_t>(es));
                        }
                        pos += static_cast<size_t>(8 * width);
                      }
                      finishBytes(o, ob);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(HansDecode, "mantissa, fixed, var, pdf, reshuff, out");

// VisionOps.cpp - detection / vision device ops: PSROIPoolingV2 and its gradient (R-FCN position-sensitive
// average pooling, through summed-area tables), RotatedNMS (greedy NMS of rotated boxes, polygon clipping in
// double), RandomChoiceWithMask and SubSample (seeded random sampling of indices / labels), NormalizeBatch
// (per-utterance feature normalization), MaskedSoftmaxWithRelPosBias (Swin's window-attention softmax) and
// DeformableConv2d with its backward (bilinear sampling with zero padding, then a convolution with stride = kernel).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/List.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "AtenOpSupport.h"
#include "npu/graph.h"

using namespace npu::opslib::aten;

namespace {

c10::List<std::optional<at::Tensor>> indexList(std::initializer_list<at::Tensor> tensors) {
  c10::List<std::optional<at::Tensor>> list;
  for (const at::Tensor& t : tensors) list.push_back(t);
  return list;
}

// A host generator for one random launch: `seed` from the npu generator (or the caller's explicit seed) and
// `offset` selecting an independent stream for it. In a graph replay the seed is the replay's (npu/graph.h).
at::Generator engineFor(int64_t seed, int64_t offset) {
  return at::make_generator<at::CPUGeneratorImpl>(nrtReplaySeeded(static_cast<uint64_t>(seed)) +
                                                  0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(offset));
}

}  // namespace

// ---- PSROIPoolingV2 / PSROIPoolingGradV2D --------------------------------------------------------------------

namespace {

// Every roi's bins: rows [h0, h1) and columns [w0, w1) of the map, clipped to it, and the batch entry it reads.
struct PsRoiBins {
  at::Tensor batch;   // (R,) long, clamped into range
  at::Tensor valid;   // (R,) bool: the roi's batch index names an entry of the map
  at::Tensor h0, h1;  // (R, G) long
  at::Tensor w0, w1;  // (R, G) long
};

// rois (B, 5, R'): [batch_id, x1, y1, x2, y2] per column; roi b * R' + r. Corners round half up to whole pixels and
// the end pixel is inclusive; a roi is at least 0.1 wide / high. Positions are float32, as the device kernel's.
PsRoiBins psRoiBins(const at::Tensor& rois, int64_t batch, int64_t height, int64_t width, double scale,
                    int64_t group) {
  const at::Tensor r = rois.to(at::kFloat).permute({0, 2, 1}).reshape({-1, 5});
  const at::Tensor id = r.select(1, 0).floor();
  const at::Tensor corner = (r.narrow(1, 1, 4) + 0.5).floor();
  const at::Tensor start_w = corner.select(1, 0) * scale, start_h = corner.select(1, 1) * scale;
  const at::Tensor end_w = (corner.select(1, 2) + 1) * scale, end_h = (corner.select(1, 3) + 1) * scale;
  const at::Tensor bin_w = (end_w - start_w).clamp_min(0.1) / group;
  const at::Tensor bin_h = (end_h - start_h).clamp_min(0.1) / group;
  const at::Tensor steps = at::arange(group, r.options()).unsqueeze(0);
  auto bounds = [&](const at::Tensor& start, const at::Tensor& bin, int64_t limit) {
    const at::Tensor lo = (steps * bin.unsqueeze(1) + start.unsqueeze(1)).floor().clamp(0, limit);
    const at::Tensor hi = ((steps + 1) * bin.unsqueeze(1) + start.unsqueeze(1)).ceil().clamp(0, limit);
    return std::make_pair(lo.to(at::kLong), hi.to(at::kLong));
  };
  PsRoiBins bins;
  std::tie(bins.h0, bins.h1) = bounds(start_h, bin_h, height);
  std::tie(bins.w0, bins.w1) = bounds(start_w, bin_w, width);
  bins.valid = (id >= 0) & (id < batch);
  bins.batch = id.clamp(0, batch - 1).to(at::kLong);
  return bins;
}

// Broadcastable index tensors addressing bin (r, d, ph, pw) of channel (d * G + ph) * G + pw, and its area.
struct PsRoiIndex {
  at::Tensor batch, channel, h0, h1, w0, w1;  // broadcast to (R, D, G, G)
  at::Tensor area;                            // (R, 1, G, G) double, 0 for empty bins and invalid rois
};

PsRoiIndex psRoiIndex(const PsRoiBins& bins, int64_t output_dim, int64_t group) {
  const int64_t rois = bins.batch.size(0);
  PsRoiIndex ix;
  ix.batch = bins.batch.view({rois, 1, 1, 1});
  ix.channel = at::arange(output_dim * group * group, bins.batch.options()).view({1, output_dim, group, group});
  ix.h0 = bins.h0.view({rois, 1, group, 1});
  ix.h1 = bins.h1.view({rois, 1, group, 1});
  ix.w0 = bins.w0.view({rois, 1, 1, group});
  ix.w1 = bins.w1.view({rois, 1, 1, group});
  ix.area = ((ix.h1 - ix.h0) * (ix.w1 - ix.w0) * bins.valid.view({rois, 1, 1, 1})).to(at::kDouble);
  return ix;
}

// Bin sums from a summed-area table (double): table[b, c, h, w] = sum of x[b, c, :h, :w]; the mean of each bin.
void psRoiPool(const at::Tensor& features, const at::Tensor& rois, double scale, int64_t output_dim, int64_t group,
               at::Tensor& out) {
  const int64_t batch = features.size(0), channels = features.size(1);
  const int64_t height = features.size(2), width = features.size(3);
  at::Tensor table = at::zeros({batch, channels, height + 1, width + 1}, features.options().dtype(at::kDouble));
  table.narrow(2, 1, height).narrow(3, 1, width).copy_(features.to(at::kDouble).cumsum(2).cumsum(3));
  const PsRoiIndex ix = psRoiIndex(psRoiBins(rois, batch, height, width, scale, group), output_dim, group);
  auto corner = [&](const at::Tensor& h, const at::Tensor& w) {
    return table.index(indexList({ix.batch, ix.channel, h, w}));
  };
  const at::Tensor sums = corner(ix.h1, ix.w1) - corner(ix.h0, ix.w1) - corner(ix.h1, ix.w0) + corner(ix.h0, ix.w0);
  out.copy_(at::where(ix.area > 0, sums / ix.area.clamp_min(1), 0.0));
}

// The adjoint of psRoiPool: each bin's gradient / area goes to the 4 corners of a difference table whose 2-D
// prefix sum spreads it evenly over the bin's pixels.
void psRoiPoolGrad(const at::Tensor& grad, const at::Tensor& rois, double scale, int64_t output_dim, int64_t group,
                   at::Tensor& out) {
  const int64_t batch = out.size(0), channels = out.size(1), height = out.size(2), width = out.size(3);
  const PsRoiIndex ix = psRoiIndex(psRoiBins(rois, batch, height, width, scale, group), output_dim, group);
  const at::Tensor share = at::where(ix.area > 0, grad.to(at::kDouble) / ix.area.clamp_min(1), 0.0);
  at::Tensor diff = at::zeros({batch, channels, height + 1, width + 1}, share.options());
  diff.index_put_(indexList({ix.batch, ix.channel, ix.h0, ix.w0}), share, /*accumulate=*/true);
  diff.index_put_(indexList({ix.batch, ix.channel, ix.h0, ix.w1}), -share, /*accumulate=*/true);
  diff.index_put_(indexList({ix.batch, ix.channel, ix.h1, ix.w0}), -share, /*accumulate=*/true);
  diff.index_put_(indexList({ix.batch, ix.channel, ix.h1, ix.w1}), share, /*accumulate=*/true);
  out.copy_(diff.cumsum(2).cumsum(3).narrow(2, 0, height).narrow(3, 0, width));
}

void checkPsRoi(const char* op, const at::Tensor& rois, int64_t batch, int64_t channels, int64_t group,
                int64_t output_dim, double scale) {
  TORCH_CHECK(rois.dim() == 3 && rois.size(0) == batch && rois.size(1) == 5, op, ": rois must be (", batch,
              ", 5, rois_num), got ", rois.sizes());
  TORCH_CHECK(group > 0 && group < 128 && output_dim > 0 && channels == output_dim * group * group, op,
              ": channels (", channels, ") must be outputDim * groupSize^2 with 0 < groupSize < 128, got outputDim ",
              output_dim, ", groupSize ", group);
  TORCH_CHECK(scale > 0, op, ": spatialScale must be positive, got ", scale);
}

}  // namespace

// y[b * R + r, d, ph, pw] = mean of x[batch_id, (d * G + ph) * G + pw] over bin (ph, pw) of roi r; 0 when empty.
extern "C" NOP_API aclnnStatus aclnnPSROIPoolingV2GetWorkspaceSize(const aclTensor* x, const aclTensor* rois,
                                                                   double spatialScale, int64_t outputDim,
                                                                   int64_t groupSize, aclTensor* y,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnPSROIPoolingV2", workspaceSize, executor, [&] {
    const char* op = "aclnnPSROIPoolingV2";
    at::Tensor features = requiredTensor(x, "x"), boxes = requiredTensor(rois, "rois"), out = requiredTensor(y, "y");
    TORCH_CHECK(features.dim() == 4, op, ": x must be (B, C, H, W), got ", features.sizes());
    checkPsRoi(op, boxes, features.size(0), features.size(1), groupSize, outputDim, spatialScale);
    TORCH_CHECK(out.dim() == 4 && out.size(0) == boxes.size(0) * boxes.size(2) && out.size(1) == outputDim &&
                    out.size(2) == groupSize && out.size(3) == groupSize,
                op, ": y must be (B * rois_num, outputDim, groupSize, groupSize), got ", out.sizes());
    return Prepared{{features, boxes},
                    [=]() mutable { psRoiPool(features, boxes, spatialScale, outputDim, groupSize, out); }, {out}};
  });
}
NPU_ATEN_OP(PSROIPoolingV2, "x, rois, spatialScale, outputDim, groupSize, y");

// The adjoint: every bin spreads its gradient / area evenly over its pixels (a difference table, integrated).
extern "C" NOP_API aclnnStatus aclnnPSROIPoolingGradV2DGetWorkspaceSize(
    const aclTensor* x, const aclTensor* rois, double spatialScale, int64_t groupSize, int64_t outputDim,
    const aclIntArray* inputSize, aclTensor* y, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnPSROIPoolingGradV2D", workspaceSize, executor, [&] {
    const char* op = "aclnnPSROIPoolingGradV2D";
    at::Tensor grad = requiredTensor(x, "x"), boxes = requiredTensor(rois, "rois"), out = requiredTensor(y, "y");
    const std::vector<int64_t> size = intArray(inputSize);
    TORCH_CHECK(size.size() >= 2, op, ": inputSize must be [H, W], got ", c10::IntArrayRef(size));
    TORCH_CHECK(out.dim() == 4 && out.size(2) == size[0] && out.size(3) == size[1], op,
                ": y must be (B, C, H, W) with H, W = inputSize, got ", out.sizes());
    checkPsRoi(op, boxes, out.size(0), out.size(1), groupSize, outputDim, spatialScale);
    TORCH_CHECK(grad.dim() == 4 && grad.size(0) == boxes.size(0) * boxes.size(2) && grad.size(1) == outputDim &&
                    grad.size(2) == groupSize && grad.size(3) == groupSize,
                op, ": x (the output gradient) must be (B * rois_num, outputDim, groupSize, groupSize), got ",
                grad.sizes());
    return Prepared{{grad, boxes},
                    [=]() mutable { psRoiPoolGrad(grad, boxes, spatialScale, outputDim, groupSize, out); }, {out}};
  });
}
NPU_ATEN_OP(PSROIPoolingGradV2D, "x, rois, spatialScale, groupSize, outputDim, inputSize, y");

// ---- RotatedNMS ----------------------------------------------------------------------------------------------

namespace {

struct Point {
  double x, y;
};

constexpr double kPi = 3.14159265358979323846;

// Corners of a box (counter-clockwise when w * h > 0) and its signed area w * h. mode 0: (cx, cy, w, h, degrees);
// mode 1: (x1, y1, x2, y2, degrees) whose angle turns the other way.
std::pair<std::array<Point, 4>, double> rotatedCorners(const float* box, int64_t mode) {
  const double v0 = box[0], v1 = box[1], v2 = box[2], v3 = box[3];
  double cx = v0, cy = v1, w = v2, h = v3, angle = box[4];
  if (mode == 1) {
    cx = (v0 + v2) / 2.0;
    cy = (v1 + v3) / 2.0;
    w = v2 - v0;
    h = v3 - v1;
    angle = -angle;
  }
  const double radians = angle * (kPi / 180.0);
  const double c = std::cos(radians), s = std::sin(radians);
  const std::array<Point, 4> half{{{-w / 2, -h / 2}, {w / 2, -h / 2}, {w / 2, h / 2}, {-w / 2, h / 2}}};
  std::array<Point, 4> corners;
  for (size_t i = 0; i < 4; ++i) {
    corners[i] = {cx + half[i].x * c - half[i].y * s, cy + half[i].x * s + half[i].y * c};
  }
  return {corners, w * h};
}

// Twice the signed area of triangle (a, b, p): positive when p lies left of a -> b.
double side(const Point& a, const Point& b, const Point& p) {
  return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
}

Point crossing(const Point& p, const Point& q, const Point& a, const Point& b) {
  const double sp = side(a, b, p), sq = side(a, b, q);
  const double t = sp / (sp - sq);
  return {p.x + t * (q.x - p.x), p.y + t * (q.y - p.y)};
}

// Sutherland-Hodgman: the part of convex polygon `subject` inside the counter-clockwise quadrilateral `clip`.
std::vector<Point> clipPolygon(std::vector<Point> subject, const std::array<Point, 4>& clip) {
  for (size_t e = 0; e < 4 && !subject.empty(); ++e) {
    const Point& a = clip[e];
    const Point& b = clip[(e + 1) % 4];
    std::vector<Point> kept;
    for (size_t i = 0; i < subject.size(); ++i) {
      const Point& p = subject[i];
      const Point& q = subject[(i + 1) % subject.size()];
      const bool p_in = side(a, b, p) >= 0, q_in = side(a, b, q) >= 0;
      if (q_in) {
        if (!p_in) kept.push_back(crossing(p, q, a, b));
        kept.push_back(q);
      } else if (p_in) {
        kept.push_back(crossing(p, q, a, b));
      }
    }
    subject = std::move(kept);
  }
  return subject;
}

double polygonArea(const std::vector<Point>& points) {
  double twice = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const Point& q = points[(i + 1) % points.size()];
    twice += p.x * q.y - q.x * p.y;
  }
  return std::abs(twice) / 2.0;
}

// Boxes of area <= 1e-14 (w * h, negative when one side is) overlap nothing.
double rotatedIou(const float* a, const float* b, int64_t mode) {
  const auto [corners_a, area_a] = rotatedCorners(a, mode);
  const auto [corners_b, area_b] = rotatedCorners(b, mode);
  if (!(area_a > 1e-14) || !(area_b > 1e-14)) return 0.0;
  const double inter = polygonArea(clipPolygon({corners_a.begin(), corners_a.end()}, corners_b));
  return inter / (area_a + area_b - inter);
}

// Greedy NMS (see aclnnRotatedNMS) on the host: the kept indices in order.
std::vector<int64_t> rotatedNms(const at::Tensor& dets, const at::Tensor& scores, double iou_threshold,
                                double score_threshold, int64_t limit, int64_t mode) {
  const at::Tensor b = dets.to(at::kFloat).contiguous(), s = scores.to(at::kFloat).contiguous();
  const float* box = b.data_ptr<float>();
  const float* score = s.data_ptr<float>();
  std::vector<int64_t> order(b.size(0));
  std::iota(order.begin(), order.end(), 0);
  // NaN scores sort last (a strict weak order) and never pass the threshold.
  auto key = [&](int64_t i) { return std::isnan(score[i]) ? -std::numeric_limits<float>::infinity() : score[i]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return key(i) > key(j); });
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= limit) break;
    if (!(score[i] > score_threshold)) continue;
    const bool keep = std::all_of(kept.begin(), kept.end(), [&](int64_t k) {
      return rotatedIou(box + 5 * i, box + 5 * k, mode) <= iou_threshold;
    });
    if (keep) kept.push_back(i);
  }
  return kept;
}

}  // namespace

// Greedy NMS by descending score (ties: lower index first) over boxes scoring above scoreThreshold: a box is kept
// while its IoU with every kept box is <= iouThreshold, up to maxOutputSize (< 0: no limit). selectedIndex gets the
// kept indices first (zeros after), selectedNum their count.
extern "C" NOP_API aclnnStatus aclnnRotatedNMSGetWorkspaceSize(const aclTensor* boxes, const aclTensor* scores,
                                                               double iouThreshold, double scoreThreshold,
                                                               int64_t maxOutputSize, int64_t mode,
                                                               aclTensor* selectedIndex, aclTensor* selectedNum,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRotatedNMS", workspaceSize, executor, [&] {
    const char* op = "aclnnRotatedNMS";
    at::Tensor dets = requiredTensor(boxes, "boxes"), score = requiredTensor(scores, "scores");
    at::Tensor selected = requiredTensor(selectedIndex, "selectedIndex");
    at::Tensor count = requiredTensor(selectedNum, "selectedNum");
    TORCH_CHECK(dets.dim() == 2 && dets.size(1) == 5 && score.dim() == 1 && score.size(0) == dets.size(0), op,
                ": boxes must be (N, 5) and scores (N), got ", describeTensors({dets, score}));
    TORCH_CHECK(mode == 0 || mode == 1, op, ": mode must be 0 (cx, cy, w, h, angle) or 1 (x1, y1, x2, y2, angle)");
    TORCH_CHECK(selected.dim() == 1 && count.numel() == 1, op, ": selectedIndex must be 1-D, selectedNum one value");
    return Prepared{{dets, score}, [=]() mutable {
                      const int64_t capacity = selected.size(0);
                      const int64_t limit = maxOutputSize < 0 ? capacity : std::min(maxOutputSize, capacity);
                      const std::vector<int64_t> kept = rotatedNms(dets, score, iouThreshold, scoreThreshold, limit,
                                                                   mode);
                      at::Tensor picked = at::zeros({capacity}, at::TensorOptions().dtype(at::kLong));
                      std::copy(kept.begin(), kept.end(), picked.data_ptr<int64_t>());
                      selected.copy_(picked);
                      count.fill_(static_cast<int64_t>(kept.size()));
                    },
                    {selected, count}};
  });
}
NPU_ATEN_OP(RotatedNMS, "boxes, scores, iouThreshold, scoreThreshold, maxOutputSize, mode, selectedIndex, "
                        "selectedNum");

// ---- RandomChoiceWithMask / SubSample ------------------------------------------------------------------------

// y[:k] = the indices (one row of coordinates each) of k = min(count, nnz) true elements of x chosen at random, in
// random order; rows after them are 0. mask[i] is true for the rows holding an index.
extern "C" NOP_API aclnnStatus aclnnRandomChoiceWithMaskGetWorkspaceSize(const aclTensor* x, int64_t count,
                                                                         int64_t seed, int64_t offset, aclTensor* y,
                                                                         aclTensor* mask, uint64_t* workspaceSize,
                                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnRandomChoiceWithMask", workspaceSize, executor, [&] {
    const char* op = "aclnnRandomChoiceWithMask";
    at::Tensor input = requiredTensor(x, "x"), rows = requiredTensor(y, "y"), valid = requiredTensor(mask, "mask");
    TORCH_CHECK(input.scalar_type() == at::kBool && input.dim() >= 1, op,
                ": x must be a bool tensor of 1 or more dims");
    TORCH_CHECK(count > 0 && rows.dim() == 2 && rows.size(0) == count && rows.size(1) == input.dim() &&
                    valid.numel() == count,
                op, ": y must be (count, x.dim()) and mask (count) with count > 0, got ",
                describeTensors({rows, valid}));
    return Prepared{{input}, [=]() mutable {
                      const at::Tensor hits = input.nonzero();  // (nnz, x.dim())
                      const int64_t take = std::min<int64_t>(count, hits.size(0));
                      at::Generator gen = engineFor(seed, offset);
                      const at::Tensor pick =
                          at::randperm(hits.size(0), gen, at::TensorOptions().dtype(at::kLong)).narrow(0, 0, take);
                      at::Tensor chosen = at::zeros({count, input.dim()}, at::TensorOptions().dtype(at::kLong));
                      chosen.narrow(0, 0, take).copy_(hits.index_select(0, pick));
                      at::Tensor flags = at::zeros({count}, at::TensorOptions().dtype(at::kBool));
                      flags.narrow(0, 0, take).fill_(true);
                      rows.copy_(chosen);
                      valid.copy_(flags.view(valid.sizes()));
                    },
                    {rows, valid}};
  });
}
NPU_ATEN_OP(RandomChoiceWithMask, "x, count, seed, offset, y, mask");

// Mask R-CNN's balanced sampling of labels (-1 ignore, 0 negative, > 0 positive): keeps
// min(int(batchSizePerImages * positiveFraction), #positives) random positives and min(batch - that, #negatives)
// random negatives; every other label becomes -1.
extern "C" NOP_API aclnnStatus aclnnSubSampleGetWorkspaceSize(const aclTensor* labels, int64_t batchSizePerImages,
                                                              double positiveFraction, int64_t seed, int64_t offset,
                                                              aclTensor* y, uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnSubSample", workspaceSize, executor, [&] {
    const char* op = "aclnnSubSample";
    at::Tensor input = requiredTensor(labels, "labels"), out = requiredTensor(y, "y");
    TORCH_CHECK(!at::isFloatingType(input.scalar_type()) && input.scalar_type() != at::kBool, op,
                ": labels must be integers, got ", input.scalar_type());
    TORCH_CHECK(out.sizes() == input.sizes(), op, ": y must have labels' shape ", input.sizes());
    TORCH_CHECK(batchSizePerImages >= 0 && positiveFraction >= 0 && positiveFraction <= 1, op,
                ": batchSizePerImages must be >= 0 and positiveFraction in [0, 1]");
    return Prepared{{input}, [=]() mutable {
                      const at::Tensor flat = input.reshape({-1}).to(at::kLong);
                      const at::Tensor positives = (flat > 0).nonzero().squeeze(1);
                      const at::Tensor negatives = (flat == 0).nonzero().squeeze(1);
                      const int64_t wanted = static_cast<int64_t>(batchSizePerImages * positiveFraction);
                      const int64_t num_pos = std::min<int64_t>(wanted, positives.numel());
                      const int64_t num_neg = std::min<int64_t>(batchSizePerImages - num_pos, negatives.numel());
                      at::Generator gen = engineFor(seed, offset);
                      const at::TensorOptions index = at::TensorOptions().dtype(at::kLong);
                      const at::Tensor pos = positives.index_select(
                          0, at::randperm(positives.numel(), gen, index).narrow(0, 0, num_pos));
                      const at::Tensor neg = negatives.index_select(
                          0, at::randperm(negatives.numel(), gen, index).narrow(0, 0, num_neg));
                      at::Tensor sampled = at::full_like(flat, -1);
                      sampled.index_copy_(0, pos, flat.index_select(0, pos));
                      sampled.index_fill_(0, neg, 0);
                      out.copy_(sampled.view(out.sizes()));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(SubSample, "labels, batchSizePerImages, positiveFraction, seed, offset, y");

// ---- NormalizeBatch ------------------------------------------------------------------------------------------

// x (N, C, T): y = (x - mean) / (std + epsilon) over the first seqLen[n] frames of utterance n, per feature
// ("per_feature") or over all its features ("all_features"); std is the unbiased one.
extern "C" NOP_API aclnnStatus aclnnNormalizeBatchGetWorkspaceSize(const aclTensor* x, const aclTensor* seqLen,
                                                                   char* normalizeType, double epsilon, aclTensor* y,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNormalizeBatch", workspaceSize, executor, [&] {
    const char* op = "aclnnNormalizeBatch";
    at::Tensor input = requiredTensor(x, "x"), lengths = requiredTensor(seqLen, "seqLen"), out = requiredTensor(y, "y");
    const std::string type = normalizeType == nullptr ? "per_feature" : normalizeType;
    TORCH_CHECK(type == "per_feature" || type == "all_features", op,
                ": normalizeType must be 'per_feature' or 'all_features', got '", type, "'");
    TORCH_CHECK(input.dim() == 3 && lengths.dim() == 1 && lengths.size(0) == input.size(0) &&
                    out.sizes() == input.sizes(),
                op, ": x must be (N, C, T), seqLen (N) and y like x, got ", describeTensors({input, lengths, out}));
    const bool per_feature = type == "per_feature";
    return Prepared{{input, lengths}, [=]() mutable {
                      const int64_t n = input.size(0), frames = input.size(2);
                      const at::Tensor x32 = input.to(at::kFloat);
                      const at::Tensor len = lengths.to(at::kLong).clamp(0, frames).view({n, 1, 1});
                      const at::Tensor inside =
                          (at::arange(frames, len.options()).view({1, 1, frames}) < len).to(at::kFloat);
                      const std::vector<int64_t> dims = per_feature ? std::vector<int64_t>{2}
                                                                    : std::vector<int64_t>{1, 2};
                      const at::Tensor used = inside.expand_as(x32);
                      const at::Tensor count = used.sum(dims, /*keepdim=*/true);
                      const at::Tensor mean = (x32 * used).sum(dims, /*keepdim=*/true) / count;
                      const at::Tensor centred = (x32 - mean) * used;
                      const at::Tensor deviation =
                          ((centred * centred).sum(dims, /*keepdim=*/true) / (count - 1)).sqrt();
                      out.copy_((x32 - mean) / (deviation + epsilon));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(NormalizeBatch, "x, seqLen, normalizeType, epsilon, y");

// ---- MaskedSoftmaxWithRelPosBias -----------------------------------------------------------------------------

// out = softmax(scaleValue * x + attenMask + relativePosBias, -1); x (B, W, N, S1, S2) or (B * W, N, S1, S2), the
// mask holds W windows of (S1, S2), the bias N heads of (S1, S2) (their size-1 dims aside). float32 inside.
extern "C" NOP_API aclnnStatus aclnnMaskedSoftmaxWithRelPosBiasGetWorkspaceSize(
    const aclTensor* x, const aclTensor* attenMaskOptional, const aclTensor* relativePosBias, double scaleValue,
    int64_t innerPrecisionMode, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMaskedSoftmaxWithRelPosBias", workspaceSize, executor, [&] {
    const char* op = "aclnnMaskedSoftmaxWithRelPosBias";
    at::Tensor input = requiredTensor(x, "x"), mask = hostTensor(attenMaskOptional);
    at::Tensor bias = requiredTensor(relativePosBias, "relativePosBias"), y = requiredTensor(out, "out");
    TORCH_CHECK((input.dim() == 4 || input.dim() == 5) && y.sizes() == input.sizes(), op,
                ": x must be 4-D or 5-D and out like it, got ", describeTensors({input, y}));
    const int64_t heads = input.size(-3), rows = input.size(-2), cols = input.size(-1);
    const int64_t windows = mask.defined() ? mask.numel() / std::max<int64_t>(rows * cols, 1) : 1;
    TORCH_CHECK(bias.numel() == heads * rows * cols, op, ": relativePosBias must hold (N, S1, S2) = (", heads, ", ",
                rows, ", ", cols, "), got ", bias.sizes());
    TORCH_CHECK(!mask.defined() || (mask.numel() == windows * rows * cols && windows > 0 &&
                                    input.numel() % (windows * heads * rows * cols) == 0),
                op, ": attenMask must hold W windows of (S1, S2) dividing x's batch, got ", mask.sizes());
    return Prepared{{input, mask, bias}, [=]() mutable {
                      at::Tensor logits = input.to(at::kFloat).reshape({-1, windows, heads, rows, cols}) * scaleValue +
                                          bias.to(at::kFloat).reshape({1, 1, heads, rows, cols});
                      if (mask.defined()) logits = logits + mask.to(at::kFloat).reshape({1, windows, 1, rows, cols});
                      y.copy_(logits.softmax(-1).reshape(y.sizes()));
                    },
                    {y}};
  });
}
NPU_ATEN_OP(MaskedSoftmaxWithRelPosBias, "x, attenMaskOptional, relativePosBias, scaleValue, innerPrecisionMode, out");

// ---- DeformableConv2d / DeformableConv2dBackward -------------------------------------------------------------

namespace {

// Sizes of one deformable convolution (stride / padding / dilation given in N, C, H, W order; padding is top,
// bottom, left, right).
struct DeformGeometry {
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_top = 0, pad_left = 0;
  int64_t dilation_h = 0, dilation_w = 0, groups = 1, deformable_groups = 1;
  bool modulated = true;
  int64_t taps() const { return kernel_h * kernel_w; }
};

DeformGeometry deformGeometry(const char* op, const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& offset, const aclIntArray* kernelSize, const aclIntArray* stride,
                              const aclIntArray* padding, const aclIntArray* dilation, int64_t groups,
                              int64_t deformableGroups, bool modulated) {
  const std::vector<int64_t> k = intArray(kernelSize), s = intArray(stride), p = intArray(padding);
  const std::vector<int64_t> d = intArray(dilation);
  TORCH_CHECK(k.size() == 2 && s.size() == 4 && p.size() == 4 && d.size() == 4, op,
              ": kernelSize needs 2 values, stride, padding and dilation 4");
  TORCH_CHECK(k[0] > 0 && k[1] > 0 && s[2] > 0 && s[3] > 0 && d[2] > 0 && d[3] > 0, op,
              ": kernel sizes, strides and dilations must be positive");
  DeformGeometry g;
  g.kernel_h = k[0];
  g.kernel_w = k[1];
  g.stride_h = s[2];
  g.stride_w = s[3];
  g.pad_top = p[0];
  g.pad_left = p[2];
  g.dilation_h = d[2];
  g.dilation_w = d[3];
  g.groups = groups;
  g.deformable_groups = deformableGroups;
  g.modulated = modulated;
  TORCH_CHECK(input.dim() == 4 && weight.dim() == 4 && offset.dim() == 4 && offset.size(0) == input.size(0), op,
              ": input, weight and offset must be 4-D with one batch, got ", describeTensors({input, weight, offset}));
  TORCH_CHECK(groups > 0 && deformableGroups > 0 && input.size(1) % groups == 0 &&
                  input.size(1) % deformableGroups == 0 && weight.size(1) * groups == input.size(1) &&
                  weight.size(2) == g.kernel_h && weight.size(3) == g.kernel_w,
              op, ": groups / deformableGroups must divide the channels and weight be (Co, C / groups, kH, kW)");
  TORCH_CHECK(offset.size(1) == deformableGroups * g.taps() * (modulated ? 3 : 2), op, ": offset needs ",
              deformableGroups * g.taps() * (modulated ? 3 : 2), " channels, got ", offset.size(1));
  return g;
}

// One bilinear corner of every sample of a deformable group: its flat index into H * W (clamped into the map),
// its weight (0 when outside the map) and the weight's derivatives along y and x.
struct Corner {
  at::Tensor index;                  // (N, K * Ho * Wo) long
  at::Tensor weight, d_dy, d_dx;     // (N, K, Ho, Wo)
};

// The 4 corners of the samples of deformable group `group`: tap (kh, kw) of output (oh, ow) samples
// (oh * sh - pad_top + kh * dh + dy, ow * sw - pad_left + kw * dw + dx); the x offsets of all groups come first in
// `offset`, then the y offsets (tap k = kh * kW + kw of group g at channel g * K + k).
std::vector<Corner> groupCorners(const at::Tensor& offset, const DeformGeometry& geo, int64_t group, int64_t height,
                                 int64_t width) {
  const int64_t n = offset.size(0), k = geo.taps(), ho = offset.size(2), wo = offset.size(3);
  const at::Tensor tap = at::arange(k, offset.options().dtype(at::kLong));
  const at::Tensor tap_y = (tap.div(geo.kernel_w, "floor") * geo.dilation_h).to(at::kFloat).view({1, k, 1, 1});
  const at::Tensor tap_x = (tap.remainder(geo.kernel_w) * geo.dilation_w).to(at::kFloat).view({1, k, 1, 1});
  const at::Tensor row = (at::arange(ho, offset.options()) * geo.stride_h - geo.pad_top).view({1, 1, ho, 1});
  const at::Tensor col = (at::arange(wo, offset.options()) * geo.stride_w - geo.pad_left).view({1, 1, 1, wo});
  const at::Tensor y = row + tap_y + offset.narrow(1, geo.deformable_groups * k + group * k, k);
  const at::Tensor x = col + tap_x + offset.narrow(1, group * k, k);
  const at::Tensor y0 = y.floor(), x0 = x.floor();
  std::vector<Corner> corners;
  for (int dy = 0; dy < 2; ++dy) {
    for (int dx = 0; dx < 2; ++dx) {
      const at::Tensor yi = y0 + dy, xi = x0 + dx;
      const at::Tensor wy = dy ? y - y0 : y0 + 1 - y;
      const at::Tensor wx = dx ? x - x0 : x0 + 1 - x;
      const at::Tensor inside = ((yi >= 0) & (yi < height) & (xi >= 0) & (xi < width)).to(at::kFloat);
      Corner c;
      // Integer arithmetic: float32 would round flat indices of maps beyond 2^24 pixels.
      const at::Tensor flat = yi.clamp(0, height - 1).to(at::kLong) * width + xi.clamp(0, width - 1).to(at::kLong);
      c.index = flat.reshape({n, k * ho * wo});
      c.weight = wy * wx * inside;
      c.d_dy = wx * inside * (dy ? 1.0 : -1.0);
      c.d_dx = wy * inside * (dx ? 1.0 : -1.0);
      corners.push_back(std::move(c));
    }
  }
  return corners;
}

// The map values at one corner: x_flat (N, Cg, H * W) -> (N, Cg, K, Ho, Wo).
at::Tensor cornerValues(const at::Tensor& x_flat, const Corner& c, const at::Tensor& shape_like) {
  const int64_t n = x_flat.size(0), channels = x_flat.size(1);
  const at::Tensor values = x_flat.gather(2, c.index.unsqueeze(1).expand({n, channels, c.index.size(1)}));
  return values.view({n, channels, shape_like.size(1), shape_like.size(2), shape_like.size(3)});
}

at::Tensor groupMask(const at::Tensor& offset, const DeformGeometry& geo, int64_t group) {
  const int64_t k = geo.taps();
  return offset.narrow(1, 2 * geo.deformable_groups * k + group * k, k);
}

// (N, C, K, Ho, Wo) samples <-> the (N, C, Ho * kH, Wo * kW) layout a stride-kernel convolution reads.
at::Tensor toConvLayout(const at::Tensor& samples, const DeformGeometry& geo) {
  const int64_t n = samples.size(0), c = samples.size(1), ho = samples.size(3), wo = samples.size(4);
  return samples.reshape({n, c, geo.kernel_h, geo.kernel_w, ho, wo})
      .permute({0, 1, 4, 2, 5, 3})
      .reshape({n, c, ho * geo.kernel_h, wo * geo.kernel_w});
}

at::Tensor fromConvLayout(const at::Tensor& laid_out, const DeformGeometry& geo) {
  const int64_t n = laid_out.size(0), c = laid_out.size(1);
  const int64_t ho = laid_out.size(2) / geo.kernel_h, wo = laid_out.size(3) / geo.kernel_w;
  return laid_out.reshape({n, c, ho, geo.kernel_h, wo, geo.kernel_w})
      .permute({0, 1, 3, 5, 2, 4})
      .reshape({n, c, geo.taps(), ho, wo});
}

// The bilinear samples (N, Cg, K, Ho, Wo) of one deformable group, before the modulation mask.
at::Tensor sampleGroup(const at::Tensor& x_flat, const std::vector<Corner>& corners) {
  at::Tensor samples;
  for (const Corner& c : corners) {
    const at::Tensor term = cornerValues(x_flat, c, c.weight) * c.weight.unsqueeze(1);
    samples = samples.defined() ? samples + term : term;
  }
  return samples;
}

at::Tensor deformableSamples(const at::Tensor& x32, const at::Tensor& offset32, const DeformGeometry& geo) {
  const int64_t n = x32.size(0), channels = x32.size(1), height = x32.size(2), width = x32.size(3);
  const int64_t per_group = channels / geo.deformable_groups;
  std::vector<at::Tensor> groups;
  for (int64_t g = 0; g < geo.deformable_groups; ++g) {
    const at::Tensor x_flat = x32.narrow(1, g * per_group, per_group).reshape({n, per_group, height * width});
    at::Tensor samples = sampleGroup(x_flat, groupCorners(offset32, geo, g, height, width));
    if (geo.modulated) samples = samples * groupMask(offset32, geo, g).unsqueeze(1);
    groups.push_back(samples);
  }
  return at::cat(groups, 1);
}

// The convolution over the samples: kernel-sized stride, no padding, no dilation.
struct SampleConv {
  std::vector<int64_t> stride, zero{0, 0}, one{1, 1};
  explicit SampleConv(const DeformGeometry& geo) : stride{geo.kernel_h, geo.kernel_w} {}
};

void deformableForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& offset, const at::Tensor& bias,
                       const DeformGeometry& geo, at::Tensor& out, at::Tensor& deform_out) {
  const at::Tensor samples = toConvLayout(deformableSamples(x.to(at::kFloat), offset.to(at::kFloat), geo), geo);
  std::optional<at::Tensor> bias32;
  if (bias.defined()) bias32 = bias.to(at::kFloat);
  const SampleConv conv(geo);
  const at::Tensor result = at::convolution(samples, weight.to(at::kFloat), bias32, conv.stride, conv.zero, conv.one,
                                            /*transposed=*/false, conv.zero, geo.groups);
  deform_out.copy_(samples);
  out.copy_(result);
}

// Gradients through one deformable group's sampling: `grad_taps` (N, Cg, K, Ho, Wo) of its modulated samples into
// grad_x (N, Cg, H * W, accumulated) and its offset / mask channels of grad_offset.
void groupBackward(const at::Tensor& x32, const at::Tensor& offset32, const at::Tensor& grad_taps,
                   const DeformGeometry& geo, int64_t g, at::Tensor grad_x, at::Tensor& grad_offset) {
  const int64_t n = x32.size(0), per_group = grad_taps.size(1), k = geo.taps();
  const int64_t height = x32.size(2), width = x32.size(3);
  const at::Tensor x_flat = x32.narrow(1, g * per_group, per_group).reshape({n, per_group, height * width});
  // The gradient of the unmodulated samples: the mask scales every corner's contribution.
  const at::Tensor grad_samples = geo.modulated ? grad_taps * groupMask(offset32, geo, g).unsqueeze(1) : grad_taps;
  at::Tensor samples, grad_y_pos, grad_x_pos;
  auto accumulate = [](at::Tensor& sum, const at::Tensor& term) { sum = sum.defined() ? sum + term : term; };
  for (const Corner& c : groupCorners(offset32, geo, g, height, width)) {
    const at::Tensor values = cornerValues(x_flat, c, c.weight);
    accumulate(samples, values * c.weight.unsqueeze(1));
    // A corner weight is linear in the sample position: d(sample)/dy = value * d(weight)/dy.
    const at::Tensor pulled = (grad_samples * values).sum(1);
    accumulate(grad_y_pos, pulled * c.d_dy);
    accumulate(grad_x_pos, pulled * c.d_dx);
    const at::Tensor spread = (grad_samples * c.weight.unsqueeze(1)).reshape({n, per_group, -1});
    grad_x.scatter_add_(2, c.index.unsqueeze(1).expand_as(spread), spread);
  }
  grad_offset.narrow(1, g * k, k).copy_(grad_x_pos);
  grad_offset.narrow(1, geo.deformable_groups * k + g * k, k).copy_(grad_y_pos);
  if (geo.modulated) {
    grad_offset.narrow(1, 2 * geo.deformable_groups * k + g * k, k).copy_((grad_taps * samples).sum(1));
  }
}

void deformableBackward(const at::Tensor& x, const at::Tensor& grad_out, const at::Tensor& deform_out,
                        const at::Tensor& weight, const at::Tensor& offset, const DeformGeometry& geo,
                        at::Tensor& grad_input, at::Tensor& grad_weight, at::Tensor& grad_offset,
                        at::Tensor& grad_bias) {
  const at::Tensor x32 = x.to(at::kFloat), offset32 = offset.to(at::kFloat);
  const SampleConv conv(geo);
  const std::vector<int64_t> bias_size{weight.size(0)};
  const auto [grad_samples, conv_grad_weight, conv_grad_bias] = at::convolution_backward(
      grad_out.to(at::kFloat), deform_out.to(at::kFloat), weight.to(at::kFloat), at::IntArrayRef(bias_size),
      conv.stride, conv.zero, conv.one, /*transposed=*/false, conv.zero, geo.groups, {true, true, true});
  const int64_t n = x32.size(0), channels = x32.size(1);
  const int64_t per_group = channels / geo.deformable_groups;
  const at::Tensor grad_taps = fromConvLayout(grad_samples, geo);
  at::Tensor grad_x = at::zeros({n, channels, x32.size(2) * x32.size(3)}, x32.options());
  at::Tensor grad_off = at::zeros(offset32.sizes(), offset32.options());
  for (int64_t g = 0; g < geo.deformable_groups; ++g) {
    groupBackward(x32, offset32, grad_taps.narrow(1, g * per_group, per_group), geo, g,
                  grad_x.narrow(1, g * per_group, per_group), grad_off);
  }
  grad_input.copy_(grad_x.view(x32.sizes()));
  grad_weight.copy_(conv_grad_weight);
  grad_offset.copy_(grad_off);
  grad_bias.copy_(conv_grad_bias.view(grad_bias.sizes()));
}

}  // namespace

// out = conv2d(deformOut, weight, bias, stride = kernel); deformOut (N, C, Ho * kH, Wo * kW): the input sampled
// bilinearly (zero outside the map) at the offset taps, times the mask when modulated. Offsets (N, dg * K * 3, Ho,
// Wo): x offsets, y offsets, masks, each group-major. Everything is computed and written in float32.
extern "C" NOP_API aclnnStatus aclnnDeformableConv2dGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* offset, const aclTensor* bias,
    const aclIntArray* kernelSize, const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
    int64_t groups, int64_t deformableGroups, bool modulated, aclTensor* out, aclTensor* deformOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDeformableConv2d", workspaceSize, executor, [&] {
    const char* op = "aclnnDeformableConv2d";
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor off = requiredTensor(offset, "offset"), b = hostTensor(bias);
    at::Tensor y = requiredTensor(out, "out"), sampled = requiredTensor(deformOut, "deformOut");
    const DeformGeometry geo = deformGeometry(op, x, w, off, kernelSize, stride, padding, dilation, groups,
                                              deformableGroups, modulated);
    TORCH_CHECK(sampled.dim() == 4 && sampled.size(2) == off.size(2) * geo.kernel_h &&
                    sampled.size(3) == off.size(3) * geo.kernel_w && y.dim() == 4 && y.size(1) == w.size(0),
                op, ": out must be (N, Co, Ho, Wo) and deformOut (N, C, Ho * kH, Wo * kW), got ",
                describeTensors({y, sampled}));
    return Prepared{{x, w, off, b}, [=]() mutable { deformableForward(x, w, off, b, geo, y, sampled); },
                    {y, sampled}};
  });
}
NPU_ATEN_OP(DeformableConv2d, "input, weight, offset, bias, kernelSize, stride, padding, dilation, groups, "
                              "deformableGroups, modulated, out, deformOut");

// Gradients of DeformableConv2d: the convolution's (against offsetOut, the forward's deformOut) give gradWeight,
// gradBias and the gradient of the samples, which flows to the input pixels (bilinear weights) and to the offsets
// (each corner weight is linear in the sample position) and masks.
extern "C" NOP_API aclnnStatus aclnnDeformableConv2dBackwardGetWorkspaceSize(
    const aclTensor* input, const aclTensor* gradOutput, const aclTensor* offsetOut, const aclTensor* weight,
    const aclTensor* offset, const aclIntArray* kernelSize, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, int64_t groups, int64_t deformableGroups, bool modulated, aclTensor* gradInput,
    aclTensor* gradWeight, aclTensor* gradOffset, aclTensor* gradBias, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnDeformableConv2dBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnDeformableConv2dBackward";
    at::Tensor x = requiredTensor(input, "input"), grad = requiredTensor(gradOutput, "gradOutput");
    at::Tensor sampled = requiredTensor(offsetOut, "offsetOut"), w = requiredTensor(weight, "weight");
    at::Tensor off = requiredTensor(offset, "offset");
    at::Tensor gx = requiredTensor(gradInput, "gradInput"), gw = requiredTensor(gradWeight, "gradWeight");
    at::Tensor goff = requiredTensor(gradOffset, "gradOffset"), gb = requiredTensor(gradBias, "gradBias");
    const DeformGeometry geo = deformGeometry(op, x, w, off, kernelSize, stride, padding, dilation, groups,
                                              deformableGroups, modulated);
    TORCH_CHECK(sampled.dim() == 4 && sampled.size(2) == off.size(2) * geo.kernel_h &&
                    sampled.size(3) == off.size(3) * geo.kernel_w && grad.dim() == 4 && grad.size(1) == w.size(0),
                op, ": offsetOut must be (N, C, Ho * kH, Wo * kW) and gradOutput (N, Co, Ho, Wo), got ",
                describeTensors({sampled, grad}));
    TORCH_CHECK(gx.sizes() == x.sizes() && gw.sizes() == w.sizes() && goff.sizes() == off.sizes() &&
                    gb.numel() == w.size(0),
                op, ": gradients must have the shapes of input, weight, offset and (Co)");
    return Prepared{{x, grad, sampled, w, off},
                    [=]() mutable { deformableBackward(x, grad, sampled, w, off, geo, gx, gw, goff, gb); },
                    {gx, gw, goff, gb}};
  });
}
NPU_ATEN_OP(DeformableConv2dBackward, "input, gradOutput, offsetOut, weight, offset, kernelSize, stride, padding, "
                                      "dilation, groups, deformableGroups, modulated, gradInput, gradWeight, "
                                      "gradOffset, gradBias");

// RotatedBoxOps.cpp - rotated-box device ops. RotatedBoxEncode / RotatedBoxDecode: corner boxes
// [x0, y0, x1, y1, angle in degrees] as [B, 5, N] against (dx, dy, dw, dh, dangle) deltas, sides floored at 1 and
// angles compared through their tangents. RotatedIou / RotatedOverlaps: intersection areas of boxes [B, 5, N] and
// [B, 5, K] (cx, cy, w, h, angle or x1, y1, x2, y2, angle; angles in degrees, counter-clockwise) by convex polygon
// clipping in double precision. Degenerate or non-finite boxes overlap nothing.
#include <ATen/TensorOperators.h>
#include <ATen/ops/atan.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tan.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kRadiansPerDegree = kPi / 180.0;

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// ---- encode / decode -------------------------------------------------------------------------------------

struct CenterBoxes {
  at::Tensor cx, cy, w, h, angle;  // [B, N] float32
};

// Corner boxes [B, 5, N] as centres and sides (each side at least 1, so logs and divisions stay finite).
CenterBoxes centred(const at::Tensor& boxes) {
  const at::Tensor f = wide(boxes);
  const at::Tensor w = (f.select(1, 2) - f.select(1, 0)).clamp_min(1.0);
  const at::Tensor h = (f.select(1, 3) - f.select(1, 1)).clamp_min(1.0);
  return {f.select(1, 0) + w / 2, f.select(1, 1) + h / 2, w, h, f.select(1, 4)};
}

void checkCodedBoxes(const char* op, const at::Tensor& boxes, const at::Tensor& other, const at::Tensor& weight,
                     const at::Tensor& out) {
  TORCH_CHECK(boxes.dim() == 3 && boxes.size(1) == 5, op, ": boxes must be [B, 5, N], got ", boxes.sizes());
  TORCH_CHECK(other.sizes() == boxes.sizes() && out.sizes() == boxes.sizes(), op, ": all boxes must be ",
              boxes.sizes(), ", got ", other.sizes(), " and ", out.sizes());
  TORCH_CHECK(weight.numel() == 5, op, ": weight must hold 5 values, got ", weight.sizes());
}

// ---- overlaps --------------------------------------------------------------------------------------------

struct Point {
  double x, y;
};

struct RotatedBox {
  double cx, cy, w, h, degrees;
};

// Box i of batch b from a contiguous double [B, 5, count] block.
RotatedBox boxAt(const double* data, int64_t b, int64_t i, int64_t count, bool corner_form) {
  const double* first = data + b * 5 * count + i;
  const double v0 = first[0], v1 = first[count], v2 = first[2 * count], v3 = first[3 * count];
  const double degrees = first[4 * count];
  if (corner_form) return {(v0 + v2) / 2, (v1 + v3) / 2, v2 - v0, v3 - v1, degrees};
  return {v0, v1, v2, v3, degrees};
}

bool usable(const RotatedBox& box) {
  return std::isfinite(box.cx) && std::isfinite(box.cy) && std::isfinite(box.w) && std::isfinite(box.h) &&
         std::isfinite(box.degrees) && box.w > 0 && box.h > 0;
}

// The corners counter-clockwise (a rotation keeps the axis-aligned corners' orientation).
std::vector<Point> corners(const RotatedBox& box) {
  const double radians = box.degrees * kRadiansPerDegree, c = std::cos(radians), s = std::sin(radians);
  const std::array<double, 4> dx{-box.w / 2, box.w / 2, box.w / 2, -box.w / 2};
  const std::array<double, 4> dy{-box.h / 2, -box.h / 2, box.h / 2, box.h / 2};
  std::vector<Point> points;
  for (size_t k = 0; k < 4; ++k) points.push_back({box.cx + dx[k] * c - dy[k] * s, box.cy + dx[k] * s + dy[k] * c});
  return points;
}

// How far p lies to the left of the directed line a -> b (scaled by its length).
double leftOf(const Point& a, const Point& b, const Point& p) {
  return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
}

// The part of convex `polygon` left of edge a -> b. vertex_tolerance admits vertices just outside;
// edge_tolerance skips crossings of (nearly) parallel edges.
std::vector<Point> clipByEdge(const std::vector<Point>& polygon, const Point& a, const Point& b,
                              double vertex_tolerance, double edge_tolerance) {
  std::vector<Point> kept;
  for (size_t k = 0; k < polygon.size(); ++k) {
    const Point& p = polygon[k];
    const Point& q = polygon[(k + 1) % polygon.size()];
    const double sp = leftOf(a, b, p), sq = leftOf(a, b, q);
    const bool p_in = sp >= -vertex_tolerance, q_in = sq >= -vertex_tolerance;
    if (p_in) kept.push_back(p);
    if (p_in != q_in && std::abs(sp - sq) > edge_tolerance) {
      const double t = std::clamp(sp / (sp - sq), 0.0, 1.0);  // within p -> q even with a vertex tolerance
      kept.push_back({p.x + t * (q.x - p.x), p.y + t * (q.y - p.y)});
    }
  }
  return kept;
}

double polygonArea(const std::vector<Point>& polygon) {
  double twice = 0;
  for (size_t k = 0; k < polygon.size(); ++k) {
    const Point& p = polygon[k];
    const Point& q = polygon[(k + 1) % polygon.size()];
    twice += p.x * q.y - q.x * p.y;
  }
  return std::abs(twice) / 2;
}

double intersectionArea(const RotatedBox& first, const RotatedBox& second, double vertex_tolerance,
                        double edge_tolerance) {
  if (!usable(first) || !usable(second)) return 0;
  std::vector<Point> polygon = corners(first);
  const std::vector<Point> window = corners(second);
  for (size_t e = 0; e < window.size() && polygon.size() >= 3; ++e) {
    polygon = clipByEdge(polygon, window[e], window[(e + 1) % window.size()], vertex_tolerance, edge_tolerance);
  }
  return polygon.size() < 3 ? 0 : polygonArea(polygon);
}

enum class Measure { kArea, kIou, kIof };

double measure(const RotatedBox& first, const RotatedBox& second, Measure what, double v_tol, double e_tol) {
  const double inter = intersectionArea(first, second, v_tol, e_tol);
  if (what == Measure::kArea) return inter;
  const double base = what == Measure::kIof ? first.w * first.h : first.w * first.h + second.w * second.h - inter;
  return inter > 0 && base > 0 ? inter / base : 0;
}

// boxes [B, 5, N], query [B, 5, K] -> out [B, N, K] (cross) or [B, N] (box n with query box n).
void pairwise(const at::Tensor& boxes, const at::Tensor& query, bool corner_form, Measure what, bool cross,
              double v_tol, double e_tol, at::Tensor out) {
  const at::Tensor a = boxes.to(at::kDouble).contiguous(), q = query.to(at::kDouble).contiguous();
  const int64_t batches = a.size(0), n = a.size(2), k = q.size(2);
  at::Tensor result = cross ? at::empty({batches, n, k}, a.options()) : at::empty({batches, n}, a.options());
  double* r = result.data_ptr<double>();
  const double* pa = a.const_data_ptr<double>();
  const double* pq = q.const_data_ptr<double>();
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      const RotatedBox first = boxAt(pa, b, i, n, corner_form);
      if (!cross) {
        *r++ = measure(first, boxAt(pq, b, i, k, corner_form), what, v_tol, e_tol);
        continue;
      }
      for (int64_t j = 0; j < k; ++j) *r++ = measure(first, boxAt(pq, b, j, k, corner_form), what, v_tol, e_tol);
    }
  }
  out.copy_(result);
}

void checkPairs(const char* op, const at::Tensor& boxes, const at::Tensor& query, const at::Tensor& out,
                bool cross) {
  TORCH_CHECK(boxes.dim() == 3 && query.dim() == 3 && boxes.size(1) == 5 && query.size(1) == 5, op,
              ": boxes and query boxes must be [B, 5, N] and [B, 5, K], got ", boxes.sizes(), " and ", query.sizes());
  TORCH_CHECK(boxes.size(0) == query.size(0), op, ": boxes and query boxes must have one batch size");
  const int64_t b = boxes.size(0), n = boxes.size(2), k = query.size(2);
  if (cross) {
    TORCH_CHECK(out.dim() == 3 && out.size(0) == b && out.size(1) == n && out.size(2) == k, op,
                ": out must be [B, N, K] = [", b, ", ", n, ", ", k, "], got ", out.sizes());
  } else {
    TORCH_CHECK(n == k && out.dim() == 2 && out.size(0) == b && out.size(1) == n, op,
                ": one-to-one pairs need N == K and out [B, N], got N = ", n, ", K = ", k, ", out ", out.sizes());
  }
}

}  // namespace

// (dx, dy, dw, dh, dangle) = ((gcx - acx) / aw, (gcy - acy) / ah, log(gw / aw), log(gh / ah),
// tan(g angle) - tan(a angle)), each times its weight.
extern "C" NOP_API aclnnStatus aclnnRotatedBoxEncodeGetWorkspaceSize(const aclTensor* anchorBox,
                                                                     const aclTensor* gtBox, const aclTensor* weight,
                                                                     aclTensor* y, uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnRotatedBoxEncode", workspaceSize, executor, [&] {
    at::Tensor anchor = requiredTensor(anchorBox, "anchorBox"), gt = requiredTensor(gtBox, "gtBox");
    at::Tensor w = requiredTensor(weight, "weight"), out = requiredTensor(y, "y");
    checkCodedBoxes("aclnnRotatedBoxEncode", anchor, gt, w, out);
    return Prepared{{anchor, gt, w}, [=]() mutable {
                      const CenterBoxes a = centred(anchor), g = centred(gt);
                      const at::Tensor scale = wide(w).reshape({5});
                      const at::Tensor da =
                          at::tan(g.angle * kRadiansPerDegree) - at::tan(a.angle * kRadiansPerDegree);
                      out.copy_(at::stack({(g.cx - a.cx) / a.w * scale[0], (g.cy - a.cy) / a.h * scale[1],
                                           at::log(g.w / a.w) * scale[2], at::log(g.h / a.h) * scale[3],
                                           da * scale[4]},
                                          1));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(RotatedBoxEncode, "anchorBox, gtBox, weight, y");

// The inverse: deltas divided by their weights, centres moved by dx * w / dy * h, sides scaled by exp(dw / dh),
// angle = atan(tan(anchor angle) + dangle) (in (-90, 90) degrees); returned as corner boxes.
extern "C" NOP_API aclnnStatus aclnnRotatedBoxDecodeGetWorkspaceSize(const aclTensor* anchorBox,
                                                                     const aclTensor* deltas, const aclTensor* weight,
                                                                     aclTensor* y, uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnRotatedBoxDecode", workspaceSize, executor, [&] {
    at::Tensor anchor = requiredTensor(anchorBox, "anchorBox"), d = requiredTensor(deltas, "deltas");
    at::Tensor w = requiredTensor(weight, "weight"), out = requiredTensor(y, "y");
    checkCodedBoxes("aclnnRotatedBoxDecode", anchor, d, w, out);
    return Prepared{{anchor, d, w}, [=]() mutable {
                      const CenterBoxes a = centred(anchor);
                      const at::Tensor delta = wide(d) / wide(w).reshape({1, 5, 1});
                      const at::Tensor cx = a.cx + delta.select(1, 0) * a.w, cy = a.cy + delta.select(1, 1) * a.h;
                      const at::Tensor half_w = at::exp(delta.select(1, 2)) * a.w / 2;
                      const at::Tensor half_h = at::exp(delta.select(1, 3)) * a.h / 2;
                      const at::Tensor angle =
                          at::atan(at::tan(a.angle * kRadiansPerDegree) + delta.select(1, 4)) / kRadiansPerDegree;
                      out.copy_(at::stack({cx - half_w, cy - half_h, cx + half_w, cy + half_h, angle}, 1));
                    },
                    {out}};
  });
}
NPU_ATEN_OP(RotatedBoxDecode, "anchorBox, deltas, weight, y");

// mode 0: IoU, 1: IoF (intersection over the first box's area).
extern "C" NOP_API aclnnStatus aclnnRotatedIouGetWorkspaceSize(const aclTensor* boxes, const aclTensor* queryBoxes,
                                                               bool trans, int64_t mode, bool isCross,
                                                               double vThreshold, double eThreshold, aclTensor* iou,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRotatedIou", workspaceSize, executor, [&] {
    const char* op = "aclnnRotatedIou";
    at::Tensor a = requiredTensor(boxes, "boxes"), q = requiredTensor(queryBoxes, "queryBoxes");
    at::Tensor out = requiredTensor(iou, "iou");
    TORCH_CHECK(mode == 0 || mode == 1, op, ": mode must be 0 (IoU) or 1 (IoF), got ", mode);
    checkPairs(op, a, q, out, isCross);
    const Measure what = mode == 0 ? Measure::kIou : Measure::kIof;
    return Prepared{{a, q}, [=]() mutable { pairwise(a, q, trans, what, isCross, vThreshold, eThreshold, out); },
                    {out}};
  });
}
NPU_ATEN_OP(RotatedIou, "boxes, queryBoxes, trans, mode, isCross, vThreshold, eThreshold, iou");

extern "C" NOP_API aclnnStatus aclnnRotatedOverlapsGetWorkspaceSize(const aclTensor* boxes,
                                                                    const aclTensor* queryBoxes, bool trans,
                                                                    aclTensor* overlaps, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnRotatedOverlaps", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(boxes, "boxes"), q = requiredTensor(queryBoxes, "queryBoxes");
    at::Tensor out = requiredTensor(overlaps, "overlaps");
    checkPairs("aclnnRotatedOverlaps", a, q, out, true);
    return Prepared{{a, q}, [=]() mutable { pairwise(a, q, trans, Measure::kArea, true, 0.0, 0.0, out); }, {out}};
  });
}
NPU_ATEN_OP(RotatedOverlaps, "boxes, queryBoxes, trans, overlaps");

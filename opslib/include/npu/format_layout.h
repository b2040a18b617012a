// npu/format_layout.h - the storage formats of the software NPU: which shapes each format takes, its
// padded storage shape, where each element of the logical tensor lives in that storage, and the
// copy between any two layouts of one logical tensor (the body of TransData). Header-only C++, no
// PyTorch: opslib's TransData op, its ATen-backed ops and the adapter all use this one definition.
//
// Shapes follow torch_npu (docs/formats.md draws them). With C1 = ceil(C / 16), N1 = ceil(N / 16):
//   NC1HWC0      [N, C, H, W]    -> [N, C1, H, W, 16]
//   FRACTAL_Z    [N, C, H, W]    -> [C1 * H * W, N1, 16, 16]      (conv weights: C1 H W N1 N0 C0)
//   NDC1HWC0     [N, C, D, H, W] -> [N, D, C1, H, W, 16]
//   FRACTAL_Z_3D [N, C, D, H, W] -> [D * C1 * H * W, N1, 16, 16]
//   FRACTAL_NZ   [..., M, K]     -> [..., ceil(K / C0), ceil(M / 16), 16, C0]
// NC1HWC0 and FRACTAL_Z take tensors of rank <= 4, seen as NCHW: [C] -> [1, C, 1, 1],
// [C, H] -> [1, C, H, 1], [C, H, W] -> [1, C, H, W]. FRACTAL_NZ's C0 is 32 bytes' worth of
// elements counted in at most 2-byte units: 16 for 2- and 4-byte types, 32 for 1-byte ones.
// Padding lanes hold zeros after a conversion into a private format.
#ifndef NPU_FORMAT_LAYOUT_H_
#define NPU_FORMAT_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "npu/opslib.h"

namespace npu::formats {

constexpr int64_t kBlock = 16;

inline const char* FormatName(int64_t format) {
  switch (format) {
    case ACL_FORMAT_NCHW: return "NCHW";
    case ACL_FORMAT_NHWC: return "NHWC";
    case ACL_FORMAT_ND: return "ND";
    case ACL_FORMAT_NC1HWC0: return "NC1HWC0";
    case ACL_FORMAT_FRACTAL_Z: return "FRACTAL_Z";
    case ACL_FORMAT_NDHWC: return "NDHWC";
    case ACL_FORMAT_FRACTAL_NZ: return "FRACTAL_NZ";
    case ACL_FORMAT_NCDHW: return "NCDHW";
    case ACL_FORMAT_NDC1HWC0: return "NDC1HWC0";
    case ACL_FRACTAL_Z_3D: return "FRACTAL_Z_3D";
    default: return "UNKNOWN";
  }
}

// Plain (strided) formats: the data is a row-major view, the format is only a label.
inline bool IsBaseFormat(int64_t format) {
  return format == ACL_FORMAT_ND || format == ACL_FORMAT_NCHW || format == ACL_FORMAT_NHWC ||
         format == ACL_FORMAT_NCDHW || format == ACL_FORMAT_NDHWC || format == ACL_FORMAT_UNDEFINED;
}

inline bool IsPrivateFormat(int64_t format) {
  return format == ACL_FORMAT_NC1HWC0 || format == ACL_FORMAT_FRACTAL_Z ||
         format == ACL_FORMAT_NDC1HWC0 || format == ACL_FRACTAL_Z_3D ||
         format == ACL_FORMAT_FRACTAL_NZ;
}

// The plain format a private one is converted from and to.
inline int64_t BaseFormatOf(int64_t format) {
  switch (format) {
    case ACL_FORMAT_NC1HWC0: case ACL_FORMAT_FRACTAL_Z: return ACL_FORMAT_NCHW;
    case ACL_FORMAT_NDC1HWC0: case ACL_FRACTAL_Z_3D: return ACL_FORMAT_NCDHW;
    case ACL_FORMAT_FRACTAL_NZ: return ACL_FORMAT_ND;
    default: return format;
  }
}

// Element types a private format can hold (TransData's types).
inline bool SupportsDataType(aclDataType type) {
  switch (type) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_INT8: case ACL_UINT8:
    case ACL_INT16: case ACL_INT32:
      return true;
    default:
      return false;
  }
}

// The C0 of a format for elements of `itemsize` bytes. FRACTAL_NZ blocks are 32 bytes wide in
// 2-byte units; every other private format uses 16.
inline int64_t DefaultC0(int64_t format, size_t itemsize) {
  if (format != ACL_FORMAT_FRACTAL_NZ) return kBlock;
  return 32 / static_cast<int64_t>(itemsize > 2 ? 2 : (itemsize == 0 ? 1 : itemsize));
}

// "" when a private format holds tensors of this rank, else the reason.
inline std::string CheckRank(int64_t format, size_t rank) {
  switch (format) {
    case ACL_FORMAT_NC1HWC0: case ACL_FORMAT_FRACTAL_Z:
      if (rank <= 4) return "";
      return std::string(FormatName(format)) + " holds tensors of at most 4 dims (N, C, H, W)";
    case ACL_FORMAT_NDC1HWC0: case ACL_FRACTAL_Z_3D:
      if (rank == 5) return "";
      return std::string(FormatName(format)) + " holds 5-dim tensors (N, C, D, H, W)";
    case ACL_FORMAT_FRACTAL_NZ:
      if (rank >= 2) return "";
      return "FRACTAL_NZ holds tensors of at least 2 dims (..., rows, columns)";
    default:
      return IsBaseFormat(format) ? "" : "unknown format";
  }
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// dims as NCHW (ranks 0..4, see the header comment); the canonical view of the 4-d formats.
inline std::vector<int64_t> AsNchw(const std::vector<int64_t>& dims) {
  switch (dims.size()) {
    case 0: return {1, 1, 1, 1};
    case 1: return {1, dims[0], 1, 1};
    case 2: return {1, dims[0], dims[1], 1};
    case 3: return {1, dims[0], dims[1], dims[2]};
    default: return dims;
  }
}

// A private-format view is its whole tensor or a permutation of its dims (a transposed matrix):
// the whole tensor's dims are the view's ordered by decreasing stride. Empty when the view is
// neither (not dense, or an offset).
inline std::vector<int64_t> BaseDimsOf(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                                       int64_t offset) {
  std::vector<size_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Stable: size-1 dims keep their place.
  for (size_t i = 1; i < order.size(); ++i) {
    for (size_t j = i; j > 0 && strides[order[j]] > strides[order[j - 1]] && sizes[order[j]] != 1; --j) {
      std::swap(order[j], order[j - 1]);
    }
  }
  std::vector<int64_t> base;
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const size_t d = order[k];
    if (sizes[d] != 1 && strides[d] != step) return {};
    step *= sizes[d];
  }
  if (offset != 0) return {};
  for (size_t d : order) base.push_back(sizes[d]);
  return base;
}

// The storage shape of a tensor of `dims` in `format` (the rank must have passed CheckRank).
inline std::vector<int64_t> StorageShape(int64_t format, const std::vector<int64_t>& dims, int64_t c0) {
  switch (format) {
    case ACL_FORMAT_NC1HWC0: {
      const auto d = AsNchw(dims);
      return {d[0], CeilDiv(d[1], kBlock), d[2], d[3], kBlock};
    }
    case ACL_FORMAT_FRACTAL_Z: {
      const auto d = AsNchw(dims);
      return {CeilDiv(d[1], kBlock) * d[2] * d[3], CeilDiv(d[0], kBlock), kBlock, kBlock};
    }
    case ACL_FORMAT_NDC1HWC0:
      return {dims[0], dims[2], CeilDiv(dims[1], kBlock), dims[3], dims[4], kBlock};
    case ACL_FRACTAL_Z_3D:
      return {dims[2] * CeilDiv(dims[1], kBlock) * dims[3] * dims[4], CeilDiv(dims[0], kBlock), kBlock,
              kBlock};
    case ACL_FORMAT_FRACTAL_NZ: {
      std::vector<int64_t> s(dims.begin(), dims.end() - 2);
      const int64_t m = dims[dims.size() - 2], k = dims.back();
      s.insert(s.end(), {CeilDiv(k, c0), CeilDiv(m, kBlock), kBlock, c0});
      return s;
    }
    default:
      return dims;
  }
}

inline int64_t Product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

// Where index i of one logical dim lands: (i / block) * outer + (i % block) * inner elements from
// the storage base. Unblocked dims (plain strides) have block 0: i * inner.
struct DimMap {
  int64_t size = 1;
  int64_t block = 0;
  int64_t outer = 0;
  int64_t inner = 0;
  int64_t Offset(int64_t i) const { return block == 0 ? i * inner : (i / block) * outer + (i % block) * inner; }
};

// A layout of one logical tensor: a DimMap per logical dim plus a base offset, in elements.
struct Layout {
  std::vector<DimMap> dims;
  int64_t offset = 0;
  int64_t storage_numel = 0;  // elements a private storage holds (0 for plain views)
};

inline Layout StridedLayout(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                            int64_t offset) {
  Layout l;
  l.offset = offset;
  for (size_t i = 0; i < sizes.size(); ++i) l.dims.push_back({sizes[i], 0, 0, strides[i]});
  return l;
}

// A row-major (contiguous) tensor of `sizes` from offset 0.
inline Layout ContiguousLayout(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = step;
    step *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return StridedLayout(sizes, strides, 0);
}

// The layout of a whole tensor of `dims` in a private format.
inline Layout PrivateLayout(int64_t format, const std::vector<int64_t>& dims, int64_t c0) {
  Layout l;
  l.storage_numel = Product(StorageShape(format, dims, c0));
  const auto blocked = [](int64_t size, int64_t block, int64_t outer, int64_t inner) {
    return DimMap{size, block, outer, inner};
  };
  const auto plain = [](int64_t size, int64_t stride) { return DimMap{size, 0, 0, stride}; };
  if (format == ACL_FORMAT_FRACTAL_NZ) {
    const size_t r = dims.size();
    const int64_t m = dims[r - 2], k = dims[r - 1];
    const int64_t k1 = CeilDiv(k, c0), m1 = CeilDiv(m, kBlock);
    int64_t batch_stride = k1 * m1 * kBlock * c0;
    std::vector<DimMap> batch(r - 2);
    for (size_t i = r - 2; i-- > 0;) {
      batch[i] = plain(dims[i], batch_stride);
      batch_stride *= dims[i];
    }
    l.dims = batch;
    l.dims.push_back(blocked(m, kBlock, kBlock * c0, c0));
    l.dims.push_back(blocked(k, c0, m1 * kBlock * c0, 1));
    return l;
  }
  if (format == ACL_FORMAT_NC1HWC0 || format == ACL_FORMAT_FRACTAL_Z) {
    const auto d = AsNchw(dims);
    const int64_t n = d[0], c = d[1], h = d[2], w = d[3];
    const int64_t c1 = CeilDiv(c, kBlock), n1 = CeilDiv(n, kBlock);
    std::vector<DimMap> nchw;
    if (format == ACL_FORMAT_NC1HWC0) {
      nchw = {plain(n, c1 * h * w * kBlock), blocked(c, kBlock, h * w * kBlock, 1),
              plain(h, w * kBlock), plain(w, kBlock)};
    } else {
      const int64_t tile = n1 * kBlock * kBlock;
      nchw = {blocked(n, kBlock, kBlock * kBlock, kBlock), blocked(c, kBlock, h * w * tile, 1),
              plain(h, w * tile), plain(w, tile)};
    }
    // The logical dims are the NCHW positions AsNchw filled from them.
    static const int kPositions[5][4] = {{}, {1}, {1, 2}, {1, 2, 3}, {0, 1, 2, 3}};
    for (size_t i = 0; i < dims.size(); ++i) l.dims.push_back(nchw[kPositions[dims.size()][i]]);
    return l;
  }
  // NDC1HWC0 / FRACTAL_Z_3D over [N, C, D, H, W].
  const int64_t n = dims[0], c = dims[1], dd = dims[2], h = dims[3], w = dims[4];
  const int64_t c1 = CeilDiv(c, kBlock), n1 = CeilDiv(n, kBlock);
  if (format == ACL_FORMAT_NDC1HWC0) {
    l.dims = {plain(n, dd * c1 * h * w * kBlock), blocked(c, kBlock, h * w * kBlock, 1),
              plain(dd, c1 * h * w * kBlock), plain(h, w * kBlock), plain(w, kBlock)};
  } else {
    const int64_t tile = n1 * kBlock * kBlock;
    l.dims = {blocked(n, kBlock, kBlock * kBlock, kBlock), blocked(c, kBlock, h * w * tile, 1),
              plain(dd, c1 * h * w * tile), plain(h, w * tile), plain(w, tile)};
  }
  return l;
}

namespace detail {
// The copy loop for elements of type T (moved as raw bits); see CopyLayout.
template <typename T>
void CopyLayoutOf(const std::vector<DimMap>& sd, int64_t s_offset, const T* s, const std::vector<DimMap>& dd,
                  int64_t d_offset, T* o, int64_t row_begin, int64_t row_end) {
  const size_t rank = sd.size();
  const DimMap& si = sd[rank - 1];
  const DimMap& di = dd[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  index[0] = row_begin;
  for (;;) {
    int64_t s_base = s_offset, d_base = d_offset;
    for (size_t d = 0; d + 1 < rank; ++d) {
      s_base += sd[d].Offset(index[d]);
      d_base += dd[d].Offset(index[d]);
    }
    // The innermost dim: blocked dims advance lane by lane and jump at block ends.
    if (si.block == 0 && di.block == 0) {
      for (int64_t i = 0; i < si.size; ++i) o[d_base + i * di.inner] = s[s_base + i * si.inner];
    } else {
      int64_t s_lane = 0, d_lane = 0;
      for (int64_t i = 0; i < si.size; ++i) {
        o[d_base + d_lane * di.inner] = s[s_base + s_lane * si.inner];
        if (++s_lane == si.block) {
          s_lane = 0;
          s_base += si.outer;
        }
        if (++d_lane == di.block) {
          d_lane = 0;
          d_base += di.outer;
        }
      }
    }
    size_t d = rank - 1;
    for (;;) {
      --d;
      if (++index[d] < (d == 0 ? row_end : sd[d].size)) break;
      if (d == 0) return;
      index[d] = 0;
    }
  }
}
}  // namespace detail

// Copies every element of the logical tensor from `src` (laid out as src_layout) to `dst` (as
// dst_layout); the layouts describe the same sizes. Elements are `itemsize` bytes, moved as bits.
// [row_begin, row_end) limits the copy to those indices of the first dim (the tensor seen with at
// least 2 dims), so that callers can split the work across threads; row_end < 0 means all.
inline void CopyLayout(const Layout& src_layout, const void* src, const Layout& dst_layout, void* dst,
                       size_t itemsize, int64_t row_begin = 0, int64_t row_end = -1) {
  std::vector<DimMap> sd = src_layout.dims, dd = dst_layout.dims;
  while (sd.size() < 2) {
    sd.insert(sd.begin(), DimMap{});
    dd.insert(dd.begin(), DimMap{});
  }
  for (const DimMap& d : sd) {
    if (d.size == 0) return;
  }
  if (row_end < 0 || row_end > sd[0].size) row_end = sd[0].size;
  if (row_begin >= row_end) return;
  const int64_t so = src_layout.offset, dof = dst_layout.offset;
  switch (itemsize) {
    case 1:
      return detail::CopyLayoutOf(sd, so, static_cast<const uint8_t*>(src), dd, dof, static_cast<uint8_t*>(dst),
                                  row_begin, row_end);
    case 2:
      return detail::CopyLayoutOf(sd, so, static_cast<const uint16_t*>(src), dd, dof, static_cast<uint16_t*>(dst),
                                  row_begin, row_end);
    case 4:
      return detail::CopyLayoutOf(sd, so, static_cast<const uint32_t*>(src), dd, dof, static_cast<uint32_t*>(dst),
                                  row_begin, row_end);
    default:
      return detail::CopyLayoutOf(sd, so, static_cast<const uint64_t*>(src), dd, dof, static_cast<uint64_t*>(dst),
                                  row_begin, row_end);
  }
}

}  // namespace npu::formats

#endif  // NPU_FORMAT_LAYOUT_H_

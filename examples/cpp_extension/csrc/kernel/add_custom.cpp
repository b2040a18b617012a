// add_custom.cpp - the add_custom kernel: each of GetBlockNum() blocks adds its own slice of the
// vectors (the last one takes the ragged tail). Runs on the software NPU's simulated cores.
#include "add_custom.h"

#include <algorithm>
#include <type_traits>

template <typename T>
__global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, uint32_t totalLength) {
  // Half precision adds in float and rounds once, as PyTorch does.
  using Acc = std::conditional_t<std::is_same_v<T, _Float16>, float, T>;
  const int64_t blockLength = (totalLength + GetBlockNum() - 1) / GetBlockNum();
  const int64_t begin = blockLength * GetBlockIdx();
  const int64_t end = std::min<int64_t>(begin + blockLength, totalLength);
  const auto* xGm = reinterpret_cast<const __gm__ T*>(x);
  const auto* yGm = reinterpret_cast<const __gm__ T*>(y);
  auto* zGm = reinterpret_cast<__gm__ T*>(z);
  for (int64_t i = begin; i < end; ++i) zGm[i] = static_cast<T>(static_cast<Acc>(xGm[i]) + static_cast<Acc>(yGm[i]));
}

template void add_custom<float>(GM_ADDR, GM_ADDR, GM_ADDR, uint32_t);
template void add_custom<_Float16>(GM_ADDR, GM_ADDR, GM_ADDR, uint32_t);
template void add_custom<int32_t>(GM_ADDR, GM_ADDR, GM_ADDR, uint32_t);
